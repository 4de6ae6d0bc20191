//! Accounts (people who sign in) and custom roles. Built-in roles live in code
//! (`policy::auth::BuiltinRole`); only custom ones are rows. Password hashes are PHC strings
//! (argon2id); nothing here ever sees a password.

use super::sql::{self, Exec, Row};
use super::{from_ms, json, ms, parse_ts, ts, Store, StoreError};
use chrono::{DateTime, Utc};
use policy::auth::{AccountView, BuiltinRole, Permission, Permissions};

/// An account row.
#[derive(Clone)]
pub struct AccountRow {
    pub id: String,
    pub name: String,
    pub password_hash: String,
    pub role: String,
    pub disabled: bool,
    pub demo: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the password last changed (strictly increasing, even within one millisecond):
    /// a session remembers the value it signed in under and ends when it differs.
    pub credentials_changed: DateTime<Utc>,
}

impl std::fmt::Debug for AccountRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountRow")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

impl AccountRow {
    pub fn view(&self) -> AccountView {
        AccountView {
            id: self.id.clone(),
            name: self.name.clone(),
            role: self.role.clone(),
            disabled: self.disabled,
            demo: self.demo,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A custom role row.
#[derive(Debug, Clone)]
pub struct RoleRow {
    pub name: String,
    pub permissions: Permissions,
}

const ACCOUNT_COLUMNS: &str =
    "id, name, password_hash, role, disabled, demo, created_at, updated_at, credentials_ms";

fn account(row: &Row) -> Result<AccountRow, StoreError> {
    let id: String = row.try_get("id")?;
    Ok(AccountRow {
        name: row.try_get("name")?,
        password_hash: row.try_get("password_hash")?,
        role: row.try_get("role")?,
        disabled: row.try_get::<i64, _>("disabled")? != 0,
        demo: row.try_get::<i64, _>("demo")? != 0,
        created_at: parse_ts("accounts", &id, &row.try_get::<String, _>("created_at")?)?,
        updated_at: parse_ts("accounts", &id, &row.try_get::<String, _>("updated_at")?)?,
        credentials_changed: from_ms(row.try_get("credentials_ms")?),
        id,
    })
}

/// Whether a write failed because the name (or secret) is already taken.
pub fn is_duplicate(e: &StoreError) -> bool {
    matches!(e, StoreError::Sql(sqlx::Error::Database(d)) if d.is_unique_violation())
}

/// A new account, ready to store.
pub struct NewAccount<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub password_hash: &'a str,
    pub role: &'a str,
    pub demo: bool,
}

/// What an account update changes (`None`: unchanged).
#[derive(Default)]
pub struct AccountChange<'a> {
    pub role: Option<&'a str>,
    pub disabled: Option<bool>,
    pub password_hash: Option<&'a str>,
}

impl Store {
    pub async fn account_by_name(&self, name: &str) -> Result<Option<AccountRow>, StoreError> {
        let row = sql::query(format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE name = ? COLLATE NOCASE"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(account).transpose()
    }

    pub async fn account(&self, id: &str) -> Result<Option<AccountRow>, StoreError> {
        let row = sql::query(format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(account).transpose()
    }

    /// Every account, by name.
    pub async fn accounts(&self) -> Result<Vec<AccountRow>, StoreError> {
        let rows = sql::query(format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts ORDER BY name COLLATE NOCASE"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(account).collect()
    }

    /// Whether any account exists (the login page explains how to make the first one).
    pub async fn any_account(&self) -> Result<bool, StoreError> {
        Ok(sql::query("SELECT EXISTS (SELECT 1 FROM accounts)")
            .scalar::<bool>(&self.pool)
            .await?)
    }

    /// Stores a new account; a taken name is a unique violation ([`is_duplicate`]).
    pub async fn insert_account(
        &self,
        new: NewAccount<'_>,
        now: DateTime<Utc>,
    ) -> Result<AccountRow, StoreError> {
        sql::query(
            "INSERT INTO accounts (id, name, password_hash, role, disabled, demo, created_at, updated_at, credentials_ms) \
             VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)",
        )
        .bind(new.id)
        .bind(new.name)
        .bind(new.password_hash)
        .bind(new.role)
        .bind(i64::from(new.demo))
        .bind(ts(now))
        .bind(ts(now))
        .bind(ms(now))
        .execute(&self.pool)
        .await?;
        self.account(new.id)
            .await?
            .ok_or_else(|| StoreError::corrupt("accounts", new.id, "missing right after insert"))
    }

    /// Applies `change`, unless it would leave an installation that has an enabled
    /// administrator without one ([`Refused::LastAdministrator`]). The check and the write are
    /// one `BEGIN IMMEDIATE` transaction, so two administrators demoting each other at once
    /// cannot both succeed.
    pub async fn update_account(
        &self,
        id: &str,
        change: AccountChange<'_>,
        now: DateTime<Utc>,
    ) -> Result<AccountRow, Refused> {
        let mut tx = self.pool.begin_write().await.map_err(StoreError::from)?;
        let before = administrators(Exec::from(&mut tx)).await?;
        let done = sql::query(format!(
            "UPDATE accounts SET role = COALESCE(?, role), disabled = COALESCE(?, disabled), \
             password_hash = COALESCE(?, password_hash), \
             credentials_ms = CASE WHEN ? IS NULL THEN credentials_ms ELSE {} END, updated_at = ? \
             WHERE id = ?",
            self.pool.dialect().greatest("?", "credentials_ms + 1")
        ))
        .bind(change.role)
        .bind(change.disabled.map(i64::from))
        .bind(change.password_hash)
        .bind(change.password_hash)
        .bind(ms(now))
        .bind(ts(now))
        .bind(id)
        .execute(&mut tx)
        .await
        .map_err(StoreError::from)?;
        if done == 0 {
            return Err(Refused::NotFound);
        }
        if before > 0 && administrators(Exec::from(&mut tx)).await? == 0 {
            return Err(Refused::LastAdministrator);
        }
        let row = sql::query(format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = ?"))
            .bind(id)
            .fetch_one(&mut tx)
            .await
            .map_err(StoreError::from)?;
        let after = account(&row)?;
        tx.commit().await.map_err(StoreError::from)?;
        Ok(after)
    }

    /// Gives a custom role new permissions; the role as it was before. Refused like
    /// [`Store::update_account`] when it would leave no enabled administrator.
    pub async fn update_role(&self, name: &str, permissions: Permissions) -> Result<RoleRow, Refused> {
        let mut tx = self.pool.begin_write().await.map_err(StoreError::from)?;
        let Some(before) = custom_role_in(Exec::from(&mut tx), name).await? else {
            return Err(Refused::NotFound);
        };
        let admins = administrators(Exec::from(&mut tx)).await?;
        sql::query("UPDATE roles SET permissions = ? WHERE name = ?")
            .bind(permissions.to_json())
            .bind(&before.name)
            .execute(&mut tx)
            .await
            .map_err(StoreError::from)?;
        if admins > 0 && administrators(Exec::from(&mut tx)).await? == 0 {
            return Err(Refused::LastAdministrator);
        }
        tx.commit().await.map_err(StoreError::from)?;
        Ok(before)
    }

    /// Deletes a custom role no account holds ([`Refused::InUse`] says how many do); the role
    /// as it was.
    pub async fn delete_role(&self, name: &str) -> Result<RoleRow, Refused> {
        let mut tx = self.pool.begin_write().await.map_err(StoreError::from)?;
        let Some(role) = custom_role_in(Exec::from(&mut tx), name).await? else {
            return Err(Refused::NotFound);
        };
        let holders: i64 = sql::query("SELECT COUNT(*) FROM accounts WHERE role = ? COLLATE NOCASE")
            .bind(&role.name)
            .scalar(&mut tx)
            .await
            .map_err(StoreError::from)?;
        if holders > 0 {
            return Err(Refused::InUse(holders));
        }
        sql::query("DELETE FROM roles WHERE name = ?")
            .bind(&role.name)
            .execute(&mut tx)
            .await
            .map_err(StoreError::from)?;
        tx.commit().await.map_err(StoreError::from)?;
        Ok(role)
    }

    pub async fn custom_role(&self, name: &str) -> Result<Option<RoleRow>, StoreError> {
        let row = sql::query("SELECT name, permissions FROM roles WHERE name = ? COLLATE NOCASE")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(role).transpose()
    }

    /// Every custom role, by name.
    pub async fn custom_roles(&self) -> Result<Vec<RoleRow>, StoreError> {
        let rows = sql::query("SELECT name, permissions FROM roles ORDER BY name COLLATE NOCASE")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(role).collect()
    }

    /// Stores a custom role; a taken name is a unique violation ([`is_duplicate`]).
    pub async fn insert_role(
        &self,
        name: &str,
        permissions: Permissions,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sql::query("INSERT INTO roles (name, permissions, created_at) VALUES (?, ?, ?)")
            .bind(name)
            .bind(permissions.to_json())
            .bind(ts(now))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Why a guarded account or role write did not happen (the transaction rolled back).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("no such account or role")]
    NotFound,
    /// The write would leave no enabled account whose role grants `admin`.
    #[error("the last administrator")]
    LastAdministrator,
    /// This many accounts hold the role.
    #[error("held by {0} accounts")]
    InUse(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Enabled accounts whose role grants `admin` (the built-in role, or a custom role that lists
/// the permission), read inside the write's transaction.
async fn administrators(mut tx: Exec<'_>) -> Result<i64, StoreError> {
    let mut names = vec![BuiltinRole::Admin.name().to_owned()];
    for row in sql::query("SELECT name, permissions FROM roles")
        .fetch_all(&mut tx)
        .await?
    {
        let custom = role(&row)?;
        if custom.permissions.contains(Permission::Admin) {
            names.push(custom.name);
        }
    }
    let names =
        serde_json::to_string(&names).map_err(|e| StoreError::corrupt("roles", "*", e.to_string()))?;
    let dialect = tx.dialect();
    Ok(sql::query(format!(
        "SELECT COUNT(*) FROM accounts WHERE disabled = 0 AND role COLLATE NOCASE IN ({})",
        dialect.json_text_array()
    ))
    .bind(names)
    .scalar(&mut tx)
    .await?)
}

async fn custom_role_in(mut tx: Exec<'_>, name: &str) -> Result<Option<RoleRow>, StoreError> {
    let row = sql::query("SELECT name, permissions FROM roles WHERE name = ? COLLATE NOCASE")
        .bind(name)
        .fetch_optional(&mut tx)
        .await?;
    row.as_ref().map(role).transpose()
}

fn role(row: &Row) -> Result<RoleRow, StoreError> {
    let name: String = row.try_get("name")?;
    let permissions = json(
        "roles",
        &name,
        "permissions",
        &row.try_get::<String, _>("permissions")?,
    )?;
    Ok(RoleRow { name, permissions })
}
