//! Route rows: reading them (one, a group with their profiles, filtered lists, summaries), the
//! duplicate-invocation check, and the durable-error note. Route rows are written only through
//! [`super::Writes`] (insert and compare-and-set), inside the writer's transaction.

use super::sql::{self, Exec, Row};
use super::{dispatches, history, parse_ts, profiles::ProfileColumns, Store, StoreError, Tx};
use chrono::{DateTime, Utc};
use policy::{
    api::{Caller, CallerKind, Profile, RouteDetail, RouteFilter, RouteSummary},
    route::{RouteState, StateName},
};
use std::collections::HashMap;

/// A route row as the engine needs it.
#[derive(Debug, Clone)]
pub(crate) struct RouteRow {
    pub(crate) id: String,
    pub(crate) profile_id: String,
    pub(crate) caller: Caller,
    pub(crate) title: Option<String>,
    pub(crate) state: RouteState,
    pub(crate) durable_error: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

impl RouteRow {
    /// The list view of this route.
    pub(crate) fn summary(&self, profile_name: String) -> RouteSummary {
        RouteSummary {
            id: self.id.clone(),
            profile_id: self.profile_id.clone(),
            profile_name,
            caller: self.caller.clone(),
            title: self.title.clone(),
            snapshot: self.state.snapshot(),
            durable_error: self.durable_error.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

const ROUTE_COLUMNS: &str =
    "r.id, r.profile_id, r.caller_kind, r.caller_reference, r.invocation_id, r.title, \
     r.state_json, r.durable_error, r.created_at, r.updated_at";

const TABLE: &str = "routes";

fn route_row(row: &Row) -> Result<RouteRow, StoreError> {
    let id: String = row.try_get("id")?;
    let kind: String = row.try_get("caller_kind")?;
    let kind = CallerKind::parse(&kind)
        .ok_or_else(|| StoreError::corrupt(TABLE, &id, format!("unknown caller kind `{kind}`")))?;
    Ok(RouteRow {
        profile_id: row.try_get("profile_id")?,
        caller: Caller {
            kind,
            reference: row.try_get("caller_reference")?,
            invocation_id: row.try_get("invocation_id")?,
        },
        title: row.try_get("title")?,
        state: super::json(
            TABLE,
            &id,
            "route state",
            &row.try_get::<String, _>("state_json")?,
        )?,
        durable_error: row.try_get("durable_error")?,
        created_at: parse_ts(TABLE, &id, &row.try_get::<String, _>("created_at")?)?,
        updated_at: parse_ts(TABLE, &id, &row.try_get::<String, _>("updated_at")?)?,
        id,
    })
}

/// Routes and their profiles, by route id, with one statement. Missing ids are simply absent;
/// a route whose profile is gone has `None`.
async fn load_routes_and_profiles(
    mut conn: Exec<'_>,
    ids: &[&str],
    lock: bool,
) -> Result<Vec<(RouteRow, Option<Profile>)>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; ids.len()].join(", ");
    let sql = format!(
        "SELECT {ROUTE_COLUMNS}, {} FROM routes r LEFT JOIN profiles p ON p.id = r.profile_id WHERE r.id IN ({marks}){}",
        ProfileColumns::JOINED.select_list(),
        if lock { conn.dialect().for_update_of("r") } else { String::new() }
    );
    let mut q = sql::query(sql);
    for id in ids {
        q = q.bind(*id);
    }
    let rows = q.fetch_all(conn.by_ref()).await?;
    // One profile is shared by many routes: decode each (id, revision) once.
    let mut profiles: HashMap<(String, i64), Profile> = HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let route = route_row(row)?;
        let profile = match row.try_get::<Option<String>, _>("p_id")? {
            Some(pid) => {
                let key = (pid, row.try_get::<i64, _>("p_revision")?);
                if let Some(p) = profiles.get(&key) {
                    Some(p.clone())
                } else {
                    let p = ProfileColumns::JOINED.decode(row)?;
                    profiles.insert(key, p.clone());
                    Some(p)
                }
            }
            None => None,
        };
        out.push((route, profile));
    }
    Ok(out)
}

impl Tx<'_> {
    /// Routes and their profiles, with one statement (a group commit reads all its routes at
    /// once). On PostgreSQL the route rows stay locked until the transaction ends.
    pub(crate) async fn routes_and_profiles(
        &mut self,
        ids: &[&str],
    ) -> Result<Vec<(RouteRow, Option<Profile>)>, StoreError> {
        load_routes_and_profiles(self.ex(), ids, true).await
    }

    /// The route that already serves this caller invocation, if any.
    pub(crate) async fn route_of_invocation(
        &mut self,
        kind: CallerKind,
        invocation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(
            sql::query("SELECT id FROM routes WHERE caller_kind = ? AND invocation_id = ?")
                .bind(kind.as_str())
                .bind(invocation_id)
                .scalar_optional(&mut *self.conn)
                .await?,
        )
    }

    /// Restores the timer row of every wait that lost it (restart reconciliation; the rows are
    /// written with the state, so this is a safety net).
    pub(crate) async fn restore_wait_timers(&mut self) -> Result<(), StoreError> {
        sql::query(
            "INSERT INTO timers (route_id, kind, generation, due_ms) \
             SELECT id, 'deadline', generation, deadline_ms FROM routes \
             WHERE state IN ('waiting_for_reset', 'retry_wait') AND deadline_ms IS NOT NULL \
             ON CONFLICT DO NOTHING",
        )
        .execute(&mut *self.conn)
        .await?;
        Ok(())
    }
}

impl Store {
    /// One route and its profile (`None` for a profile that is gone).
    pub(crate) async fn route_and_profile(
        &self,
        id: &str,
    ) -> Result<Option<(RouteRow, Option<Profile>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Ok(load_routes_and_profiles(Exec::from(&mut conn), &[id], false)
            .await?
            .into_iter()
            .next())
    }

    /// A route in a list (with its profile's name).
    pub(crate) async fn route_summary(&self, id: &str) -> Result<Option<RouteSummary>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        summary(Exec::from(&mut conn), id).await
    }

    /// A route with its history and dispatch records, read in one transaction so the three
    /// agree (a commit between the reads would otherwise show a snapshot ahead of its history).
    pub(crate) async fn route_detail(&self, id: &str) -> Result<Option<RouteDetail>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let Some(route) = summary(Exec::from(&mut tx), id).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let detail = RouteDetail {
            route,
            history: history::load(Exec::from(&mut tx), id).await?,
            dispatches: dispatches::load(Exec::from(&mut tx), id).await?,
        };
        tx.rollback().await?;
        Ok(Some(detail))
    }

    /// Routes matching `filter`, most recently changed first.
    pub(crate) async fn list_routes(&self, filter: &RouteFilter) -> Result<Vec<RouteSummary>, StoreError> {
        let mut sql = format!(
            "SELECT {ROUTE_COLUMNS}, p.name AS profile_name FROM routes r JOIN profiles p ON p.id = r.profile_id \
             WHERE 1 = 1"
        );
        if filter.caller_kind.is_some() {
            sql.push_str(" AND r.caller_kind = ?");
        }
        if filter.caller_reference.is_some() {
            sql.push_str(" AND r.caller_reference = ?");
        }
        if filter.state.is_some() {
            sql.push_str(" AND r.state = ?");
        }
        if filter.open_only {
            let finished: Vec<String> = StateName::ALL
                .into_iter()
                .filter(|s| s.is_terminal())
                .map(|s| format!("'{}'", s.as_str()))
                .collect();
            sql.push_str(&format!(" AND r.state NOT IN ({})", finished.join(", ")));
        }
        if filter.profile_id.is_some() {
            sql.push_str(" AND r.profile_id = ?");
        }
        sql.push_str(" ORDER BY r.updated_at DESC, r.id LIMIT ?");
        let mut q = sql::query(sql);
        if let Some(k) = filter.caller_kind {
            q = q.bind(k.as_str());
        }
        if let Some(r) = &filter.caller_reference {
            q = q.bind(r);
        }
        if let Some(s) = filter.state {
            q = q.bind(s.as_str());
        }
        if let Some(p) = &filter.profile_id {
            q = q.bind(p);
        }
        let limit = filter.limit.unwrap_or(100).clamp(1, 1000);
        let rows = q.bind(i64::from(limit)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| Ok(route_row(row)?.summary(row.try_get("profile_name")?)))
            .collect()
    }

    /// Notes on the route that its latest decision could not be written (best effort: on a
    /// read-only or full disk this fails too, and the engine keeps the note in memory). The
    /// next committed step clears it.
    pub(crate) async fn note_durable_error(&self, route_id: &str, message: &str) -> Result<(), StoreError> {
        sql::query("UPDATE routes SET durable_error = ? WHERE id = ?")
            .bind(message)
            .bind(route_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Routes a restart must reconcile: open, not waiting (waits are re-armed by their timer
    /// rows), not running an attempt whose report is already durable (a scheduled report fires
    /// as if nothing happened), and not running an external runner's attempt (nobody claimed
    /// it: it is offered again; a runner acknowledged it: its lease decides).
    pub(crate) async fn routes_to_reconcile(&self) -> Result<Vec<String>, StoreError> {
        Ok(sql::query(format!(
            "SELECT r.id FROM routes r WHERE {} ORDER BY r.id",
            super::replicas::taken_up_on_restart()
        ))
        .scalars(&self.pool)
        .await?)
    }

    /// Routes waiting on a deadline.
    pub(crate) async fn waiting_routes(&self) -> Result<u64, StoreError> {
        let n: i64 =
            sql::query("SELECT COUNT(*) FROM routes WHERE state IN ('waiting_for_reset', 'retry_wait')")
                .scalar(&self.pool)
                .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

async fn summary(mut conn: Exec<'_>, id: &str) -> Result<Option<RouteSummary>, StoreError> {
    let sql = format!(
        "SELECT {ROUTE_COLUMNS}, p.name AS profile_name FROM routes r LEFT JOIN profiles p ON p.id = r.profile_id \
         WHERE r.id = ?"
    );
    let Some(row) = sql::query(sql).bind(id).fetch_optional(conn.by_ref()).await? else {
        return Ok(None);
    };
    let name: Option<String> = row.try_get("profile_name")?;
    Ok(Some(route_row(&row)?.summary(name.unwrap_or_default())))
}
