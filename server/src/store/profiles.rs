//! Profile rows and their revisions. Profile writes run in short transactions of their own
//! (the engine's writer lock keeps them from contending with route commits in this process).

use super::sql::{self, Exec, Row};
use super::{gen_i64, non_negative, parse_ts, to_json, ts, Store, StoreError, Tx};
use policy::{
    api::{CandidateTarget, Profile, ProfileKind, ProfileSummary},
    notify::NotificationRule,
    wire::PolicyDocument,
};

const TABLE: &str = "profiles";

/// `SELECT` and a profile's columns, as [`ProfileColumns::PLAIN`] decodes them: every plain
/// read of whole profiles starts with this, so a new column is added in one place.
macro_rules! select_profiles {
    ($rest:literal) => {
        concat!(
            "SELECT id, name, kind, description, revision, candidates_json, policy_json, \
             normalized_from_legacy, notifications_json, created_at, updated_at ",
            $rest
        )
    };
}

/// Column names of a profile in a result row (plain, or prefixed when joined to a route).
pub(super) struct ProfileColumns {
    id: &'static str,
    name: &'static str,
    kind: &'static str,
    description: &'static str,
    revision: &'static str,
    candidates_json: &'static str,
    policy_json: &'static str,
    normalized_from_legacy: &'static str,
    notifications_json: &'static str,
    created_at: &'static str,
    updated_at: &'static str,
}

impl ProfileColumns {
    const PLAIN: ProfileColumns = ProfileColumns {
        id: "id",
        name: "name",
        kind: "kind",
        description: "description",
        revision: "revision",
        candidates_json: "candidates_json",
        policy_json: "policy_json",
        normalized_from_legacy: "normalized_from_legacy",
        notifications_json: "notifications_json",
        created_at: "created_at",
        updated_at: "updated_at",
    };

    pub(super) const JOINED: ProfileColumns = ProfileColumns {
        id: "p_id",
        name: "p_name",
        kind: "p_kind",
        description: "p_description",
        revision: "p_revision",
        candidates_json: "p_candidates_json",
        policy_json: "p_policy_json",
        normalized_from_legacy: "p_normalized_from_legacy",
        notifications_json: "p_notifications_json",
        created_at: "p_created_at",
        updated_at: "p_updated_at",
    };

    /// `p.<column> AS <name>, ...` for a query that joins `profiles p`.
    pub(super) fn select_list(&self) -> String {
        [
            ("id", self.id),
            ("name", self.name),
            ("kind", self.kind),
            ("description", self.description),
            ("revision", self.revision),
            ("candidates_json", self.candidates_json),
            ("policy_json", self.policy_json),
            ("normalized_from_legacy", self.normalized_from_legacy),
            ("notifications_json", self.notifications_json),
            ("created_at", self.created_at),
            ("updated_at", self.updated_at),
        ]
        .iter()
        .map(|(column, name)| format!("p.{column} AS {name}"))
        .collect::<Vec<_>>()
        .join(", ")
    }

    pub(super) fn decode(&self, row: &Row) -> Result<Profile, StoreError> {
        let id: String = row.try_get(self.id)?;
        let policy: PolicyDocument = super::json(
            TABLE,
            &id,
            "policy document",
            &row.try_get::<String, _>(self.policy_json)?,
        )?;
        let targets: Vec<CandidateTarget> = super::json(
            TABLE,
            &id,
            "candidate targets",
            &row.try_get::<String, _>(self.candidates_json)?,
        )?;
        let notifications: Vec<NotificationRule> = super::json(
            TABLE,
            &id,
            "notification rules",
            &row.try_get::<String, _>(self.notifications_json)?,
        )?;
        let kind: String = row.try_get(self.kind)?;
        Ok(Profile {
            name: row.try_get(self.name)?,
            kind: ProfileKind::parse(&kind)
                .ok_or_else(|| StoreError::corrupt(TABLE, &id, format!("unknown profile kind `{kind}`")))?,
            description: row.try_get(self.description)?,
            revision: non_negative(TABLE, &id, "revision", row.try_get::<i64, _>(self.revision)?)?,
            targets,
            policy,
            normalized_from_legacy: row.try_get::<i64, _>(self.normalized_from_legacy)? != 0,
            notifications,
            created_at: parse_ts(TABLE, &id, &row.try_get::<String, _>(self.created_at)?)?,
            updated_at: parse_ts(TABLE, &id, &row.try_get::<String, _>(self.updated_at)?)?,
            id,
        })
    }
}

async fn load(mut conn: Exec<'_>, id: &str) -> Result<Option<Profile>, StoreError> {
    let row = sql::query(select_profiles!("FROM profiles WHERE id = ?"))
        .bind(id)
        .fetch_optional(conn.by_ref())
        .await?;
    row.as_ref().map(|r| ProfileColumns::PLAIN.decode(r)).transpose()
}

async fn upsert(mut conn: Exec<'_>, p: &Profile) -> Result<(), StoreError> {
    let targets = to_json(&p.targets);
    let policy = to_json(&p.policy);
    let notifications = to_json(&p.notifications);
    sql::query(
        "INSERT INTO profiles (id, name, kind, description, revision, candidates_json, policy_json, \
         normalized_from_legacy, notifications_json, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, kind = excluded.kind, description = excluded.description, \
         revision = excluded.revision, candidates_json = excluded.candidates_json, \
         policy_json = excluded.policy_json, normalized_from_legacy = excluded.normalized_from_legacy, \
         notifications_json = excluded.notifications_json, updated_at = excluded.updated_at",
    )
    .bind(&p.id)
    .bind(&p.name)
    .bind(p.kind.as_str())
    .bind(&p.description)
    .bind(gen_i64(p.revision))
    .bind(&targets)
    .bind(&policy)
    .bind(i64::from(p.normalized_from_legacy))
    .bind(&notifications)
    .bind(ts(p.created_at))
    .bind(ts(p.updated_at))
    .execute(conn.by_ref())
    .await?;
    sql::query(
        "INSERT INTO profile_revisions (profile_id, revision, candidates_json, policy_json, notifications_json, \
         created_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(&p.id)
    .bind(gen_i64(p.revision))
    .bind(&targets)
    .bind(&policy)
    .bind(&notifications)
    .bind(ts(p.updated_at))
    .execute(conn.by_ref())
    .await?;
    Ok(())
}

/// How a profile update ended, when it did not fail on storage.
#[derive(Debug)]
pub(crate) enum ProfileUpdate {
    Written(Profile),
    NotFound,
    /// The edit was based on `expected`, but `current` is the current revision.
    StaleRevision {
        current: u64,
        expected: u64,
    },
}

/// How a profile deletion ended, when it did not fail on storage.
#[derive(Debug)]
pub(crate) enum ProfileDelete {
    Deleted,
    NotFound,
    /// Routes (of any state) use the profile, so it is kept.
    InUse {
        routes: u64,
    },
}

impl Tx<'_> {
    /// A profile as this transaction sees it.
    pub(crate) async fn profile(&mut self, id: &str) -> Result<Option<Profile>, StoreError> {
        load(self.ex(), id).await
    }
}

impl Store {
    pub(crate) async fn profile(&self, id: &str) -> Result<Option<Profile>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        load(Exec::from(&mut conn), id).await
    }

    /// Every profile, whole, by name (the gateway's model list).
    pub(crate) async fn profiles(&self) -> Result<Vec<Profile>, StoreError> {
        let rows = sql::query(select_profiles!("FROM profiles ORDER BY name, id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| ProfileColumns::PLAIN.decode(r)).collect()
    }

    /// The profile whose id is `key`, or else those named `key` (names need not be unique), in
    /// one read: the id's match first.
    pub(crate) async fn profiles_called(&self, key: &str) -> Result<Vec<Profile>, StoreError> {
        let rows = sql::query(select_profiles!(
            "FROM profiles WHERE id = ? OR name = ? ORDER BY id = ? DESC, id"
        ))
        .bind(key)
        .bind(key)
        .bind(key)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| ProfileColumns::PLAIN.decode(r)).collect()
    }

    /// All profiles, by name, with how many routes (open and all) use each.
    pub(crate) async fn list_profiles(&self) -> Result<Vec<ProfileSummary>, StoreError> {
        let rows = sql::query(
            "SELECT p.id, p.name, p.description, p.revision, p.candidates_json, p.updated_at, \
             (SELECT COUNT(*) FROM routes r WHERE r.profile_id = p.id AND r.state NOT IN ('completed', 'abandoned')) \
             AS open_routes, (SELECT COUNT(*) FROM routes r WHERE r.profile_id = p.id) AS routes \
             FROM profiles p ORDER BY p.name, p.id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let id: String = row.try_get("id")?;
                let targets: Vec<CandidateTarget> = super::json(
                    TABLE,
                    &id,
                    "candidate targets",
                    &row.try_get::<String, _>("candidates_json")?,
                )?;
                Ok(ProfileSummary {
                    name: row.try_get("name")?,
                    description: row.try_get("description")?,
                    revision: non_negative(TABLE, &id, "revision", row.try_get::<i64, _>("revision")?)?,
                    candidate_ids: targets.into_iter().map(|t| t.id).collect(),
                    open_routes: non_negative(
                        TABLE,
                        &id,
                        "open routes",
                        row.try_get::<i64, _>("open_routes")?,
                    )?,
                    routes: non_negative(TABLE, &id, "routes", row.try_get::<i64, _>("routes")?)?,
                    updated_at: parse_ts(TABLE, &id, &row.try_get::<String, _>("updated_at")?)?,
                    id,
                })
            })
            .collect()
    }

    /// A profile write's transaction: `BEGIN IMMEDIATE` takes the write lock at once (waiting
    /// for it within the busy timeout), so a read inside can never be invalidated by another
    /// writer before the write (a deferred transaction that reads first fails at once with
    /// "database is locked" when it then writes).
    async fn write_tx(&self) -> Result<sql::Transaction, StoreError> {
        Ok(self.pool.begin_write().await?)
    }

    /// Stores revision 1 of a new profile.
    pub(crate) async fn insert_profile(&self, profile: &Profile) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        upsert(Exec::from(&mut tx), profile).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces profile `id` with `next(current)`, unless `expected` names another revision
    /// than the current one.
    pub(crate) async fn update_profile(
        &self,
        id: &str,
        expected: Option<u64>,
        next: impl FnOnce(&Profile) -> Profile + Send,
    ) -> Result<ProfileUpdate, StoreError> {
        let mut tx = self.write_tx().await?;
        let Some(current) = load(Exec::from(&mut tx), id).await? else {
            tx.rollback().await?;
            return Ok(ProfileUpdate::NotFound);
        };
        if let Some(expected) = expected.filter(|e| *e != current.revision) {
            tx.rollback().await?;
            return Ok(ProfileUpdate::StaleRevision {
                current: current.revision,
                expected,
            });
        }
        let profile = next(&current);
        upsert(Exec::from(&mut tx), &profile).await?;
        tx.commit().await?;
        Ok(ProfileUpdate::Written(profile))
    }

    /// Deletes profile `id` if no route uses it.
    pub(crate) async fn delete_profile(&self, id: &str) -> Result<ProfileDelete, StoreError> {
        let mut tx = self.write_tx().await?;
        let routes: i64 = sql::query("SELECT COUNT(*) FROM routes WHERE profile_id = ?")
            .bind(id)
            .scalar(&mut tx)
            .await?;
        if routes > 0 {
            tx.rollback().await?;
            return Ok(ProfileDelete::InUse {
                routes: u64::try_from(routes).unwrap_or(0),
            });
        }
        let done = sql::query("DELETE FROM profiles WHERE id = ?")
            .bind(id)
            .execute(&mut tx)
            .await?;
        if done == 0 {
            tx.rollback().await?;
            return Ok(ProfileDelete::NotFound);
        }
        tx.commit().await?;
        Ok(ProfileDelete::Deleted)
    }
}
