//! The browser-session store (tower-sessions) on the store's own database: one type over the
//! two backends' stores from `tower-sessions-sqlx-store`. Their tables are created by this
//! project's migrations like every other (SQLite `tower_sessions`, PostgreSQL
//! `tower_sessions.session`), never by the crate's own `migrate`.

use super::{Pool, Store};
use async_trait::async_trait;
use tower_sessions::{
    session::{Id, Record},
    session_store, ExpiredDeletion, SessionStore,
};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

#[derive(Debug, Clone)]
pub enum Sessions {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Store {
    /// The browser-session store on this same pool.
    pub fn session_store(&self) -> Sessions {
        match self.pool() {
            Pool::Sqlite(p) => Sessions::Sqlite(SqliteStore::new(p.clone())),
            Pool::Postgres(p) => Sessions::Postgres(PostgresStore::new(p.clone())),
        }
    }
}

#[async_trait]
impl SessionStore for Sessions {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.create(record).await,
            Sessions::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.save(record).await,
            Sessions::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            Sessions::Sqlite(s) => s.load(id).await,
            Sessions::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.delete(id).await,
            Sessions::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for Sessions {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            Sessions::Sqlite(s) => s.delete_expired().await,
            Sessions::Postgres(s) => s.delete_expired().await,
        }
    }
}
