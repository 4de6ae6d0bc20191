//! The audit log: append-only (SQLite triggers refuse every UPDATE and DELETE of its rows).

use super::sql::{self, Bind};
use super::{json, parse_ts, to_json, ts, writes::Writes, Store, StoreError};
use chrono::{DateTime, Utc};
use policy::auth::{ActorKind, AuditEntry};

/// One row to append.
#[derive(Debug, Clone)]
pub struct AuditInsert<'a> {
    pub actor_kind: ActorKind,
    pub actor: Option<&'a str>,
    pub address: Option<&'a str>,
    pub action: &'a str,
    pub target: Option<&'a str>,
    pub detail: &'a serde_json::Value,
}

/// Who did something, owned: what a route start carries to the writer, whose transaction
/// writes the start's audit row with the route.
#[derive(Debug, Clone)]
pub struct AuditActor {
    pub kind: ActorKind,
    pub name: Option<String>,
    pub address: Option<String>,
}

const INSERT: &str = "INSERT INTO audit_log (at, actor_kind, actor, address, action, target, detail) \
                      VALUES (?, ?, ?, ?, ?, ?, ?)";

impl Writes {
    /// Appends the row with the transaction's other writes (no round trip of its own).
    pub(crate) fn audit(&mut self, entry: AuditInsert<'_>, now: DateTime<Utc>) {
        let text = |s: Option<&str>| Bind::Text(s.map(str::to_owned));
        self.push_binds(
            INSERT,
            vec![
                text(Some(&ts(now))),
                text(Some(entry.actor_kind.as_str())),
                text(entry.actor),
                text(entry.address),
                text(Some(entry.action)),
                text(entry.target),
                text(Some(&to_json(entry.detail))),
            ],
        );
    }
}

impl Store {
    pub async fn append_audit(&self, entry: AuditInsert<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        sql::query(INSERT)
            .bind(ts(now))
            .bind(entry.actor_kind.as_str())
            .bind(entry.actor)
            .bind(entry.address)
            .bind(entry.action)
            .bind(entry.target)
            .bind(to_json(entry.detail))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Up to `limit` rows before `before` (all when `None`), newest first.
    pub async fn audit_page(&self, before: Option<i64>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = sql::query(
            "SELECT seq, at, actor_kind, actor, address, action, target, detail FROM audit_log \
             WHERE ? IS NULL OR seq < ? ORDER BY seq DESC LIMIT ?",
        )
        .bind(before)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                let key = seq.to_string();
                let kind: String = row.try_get("actor_kind")?;
                Ok(AuditEntry {
                    seq,
                    at: parse_ts("audit_log", &key, &row.try_get::<String, _>("at")?)?,
                    actor_kind: ActorKind::parse(&kind).ok_or_else(|| {
                        StoreError::corrupt("audit_log", &key, format!("actor kind `{kind}`"))
                    })?,
                    actor: row.try_get("actor")?,
                    address: row.try_get("address")?,
                    action: row.try_get("action")?,
                    target: row.try_get("target")?,
                    detail: json("audit_log", &key, "detail", &row.try_get::<String, _>("detail")?)?,
                })
            })
            .collect()
    }
}
