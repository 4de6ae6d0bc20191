//! API tokens. Only the SHA-256 of a token's secret is stored (hex); the secret itself is shown
//! once, when the token is made, and never kept.

use super::sql::{self, Row};
use super::{from_ms, json, ms, parse_ts, to_json, ts, Store, StoreError};
use chrono::{DateTime, Utc};
use policy::auth::{Permissions, TokenView};

/// A token row, with the name of the account it acts for.
#[derive(Debug, Clone)]
pub struct TokenRow {
    pub id: String,
    pub account_id: String,
    pub account: String,
    pub name: String,
    pub permissions: Permissions,
    pub profile_ids: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub last_used: Option<DateTime<Utc>>,
    pub revoked: Option<DateTime<Utc>>,
}

/// What a token's request needs of the account it acts for, read with the token.
#[derive(Debug, Clone)]
pub struct TokenHolder {
    pub role: String,
    pub disabled: bool,
    pub demo: bool,
}

impl TokenRow {
    pub fn view(&self) -> TokenView {
        TokenView {
            id: self.id.clone(),
            name: self.name.clone(),
            account: self.account.clone(),
            permissions: self.permissions,
            profile_ids: self.profile_ids.clone(),
            created_at: self.created_at,
            expires_at: self.expires,
            last_used_at: self.last_used,
            revoked_at: self.revoked,
        }
    }
}

/// A new token, ready to store.
pub struct NewToken<'a> {
    pub id: &'a str,
    pub account_id: &'a str,
    pub name: &'a str,
    /// Hex SHA-256 of the secret.
    pub secret_hash: &'a str,
    pub permissions: Permissions,
    pub profile_ids: Option<&'a [String]>,
    pub expires: DateTime<Utc>,
}

const COLUMNS: &str = "t.id, t.account_id, a.name AS account, t.name, t.permissions, t.profile_ids, \
                       t.created_at, t.expires_ms, t.last_used_ms, t.revoked_ms";

fn token(row: &Row) -> Result<TokenRow, StoreError> {
    let id: String = row.try_get("id")?;
    let profile_ids = row
        .try_get::<Option<String>, _>("profile_ids")?
        .map(|s| json("api_tokens", &id, "profile_ids", &s))
        .transpose()?;
    Ok(TokenRow {
        account_id: row.try_get("account_id")?,
        account: row.try_get("account")?,
        name: row.try_get("name")?,
        permissions: json(
            "api_tokens",
            &id,
            "permissions",
            &row.try_get::<String, _>("permissions")?,
        )?,
        profile_ids,
        created_at: parse_ts("api_tokens", &id, &row.try_get::<String, _>("created_at")?)?,
        expires: from_ms(row.try_get("expires_ms")?),
        last_used: row.try_get::<Option<i64>, _>("last_used_ms")?.map(from_ms),
        revoked: row.try_get::<Option<i64>, _>("revoked_ms")?.map(from_ms),
        id,
    })
}

impl Store {
    pub async fn insert_token(&self, new: NewToken<'_>, now: DateTime<Utc>) -> Result<TokenRow, StoreError> {
        sql::query(
            "INSERT INTO api_tokens (id, account_id, name, secret_hash, permissions, profile_ids, created_at, expires_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(new.id)
        .bind(new.account_id)
        .bind(new.name)
        .bind(new.secret_hash)
        .bind(new.permissions.to_json())
        .bind(new.profile_ids.map(|ids| to_json(&ids)))
        .bind(ts(now))
        .bind(ms(new.expires))
        .execute(&self.pool)
        .await?;
        self.token(new.id)
            .await?
            .ok_or_else(|| StoreError::corrupt("api_tokens", new.id, "missing right after insert"))
    }

    pub async fn token(&self, id: &str) -> Result<Option<TokenRow>, StoreError> {
        let row = sql::query(format!(
            "SELECT {COLUMNS} FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token).transpose()
    }

    /// The token whose secret hashes to `secret_hash`, revoked or expired ones included (the
    /// caller decides), with what its request needs of its account: one read per request.
    pub async fn token_by_secret_hash(
        &self,
        secret_hash: &str,
    ) -> Result<Option<(TokenRow, TokenHolder)>, StoreError> {
        let row = sql::query(format!(
            "SELECT {COLUMNS}, a.role AS account_role, a.disabled AS account_disabled, a.demo AS account_demo \
             FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.secret_hash = ?"
        ))
        .bind(secret_hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let holder = TokenHolder {
            role: row.try_get("account_role")?,
            disabled: row.try_get::<i64, _>("account_disabled")? != 0,
            demo: row.try_get::<i64, _>("account_demo")? != 0,
        };
        Ok(Some((token(&row)?, holder)))
    }

    /// Tokens, newest first: every account's, or one account's.
    pub async fn tokens(&self, account_id: Option<&str>) -> Result<Vec<TokenRow>, StoreError> {
        let rows = sql::query(format!(
            "SELECT {COLUMNS} FROM api_tokens t JOIN accounts a ON a.id = t.account_id \
             WHERE ? IS NULL OR t.account_id = ? ORDER BY t.created_at DESC, t.id DESC"
        ))
        .bind(account_id)
        .bind(account_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token).collect()
    }

    /// Revokes a token (idempotent: the first revocation time stays). `false` when there is no
    /// such token.
    pub async fn revoke_token(&self, id: &str, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sql::query("UPDATE api_tokens SET revoked_ms = COALESCE(revoked_ms, ?) WHERE id = ?")
            .bind(ms(now))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done == 1)
    }

    /// Records a use, at most once per `every_ms` (a busy runner does not write on every call).
    pub async fn touch_token(&self, id: &str, now: DateTime<Utc>, every_ms: i64) -> Result<(), StoreError> {
        sql::query(
            "UPDATE api_tokens SET last_used_ms = ? WHERE id = ? AND (last_used_ms IS NULL OR last_used_ms <= ?)",
        )
        .bind(ms(now))
        .bind(id)
        .bind(ms(now).saturating_sub(every_ms))
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
