//! The store's own thin query layer over the two backends' real sqlx drivers.
//!
//! Why not `sqlx::Any`: it hides the driver, so PostgreSQL's own features (`FOR UPDATE SKIP
//! LOCKED`, advisory locks, `LISTEN/NOTIFY`, its clock) are out of reach, and its type mapping
//! is the lowest common one. Why not two copies of every table module: the statements are the
//! same text on both (standard SQL with `?` placeholders), and two copies would drift. So the
//! table modules write each statement once, [`Query`] binds the values and runs it on whichever
//! driver the [`Exec`] holds, and the few statements that differ ask [`Exec::dialect`] (or use
//! [`Dialect`]'s spellings). Each backend keeps its own schema and migrations
//! (`migrations/sqlite/`, `migrations/postgres/`, same versions) and its own connection set-up
//! (`crate::db`).
//!
//! Values are the handful of types both schemas use: 64-bit integers, text, bytes and
//! booleans (PostgreSQL is strict about types, so integers are always bound and read as
//! `i64`; every integer column there is `BIGINT`). PostgreSQL gets `$1, $2, …` in place of the
//! `?` marks, rewritten outside quoted text.

use sqlx::{
    pool::PoolConnection,
    postgres::{PgArguments, PgRow},
    sqlite::{SqliteArguments, SqliteRow},
    Arguments, ColumnIndex, Decode, PgConnection, PgPool, Postgres, Row as _, Sqlite, SqliteConnection,
    SqlitePool, Type,
};
use std::borrow::Cow;

/// Which SQL the connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `FOR UPDATE` on PostgreSQL (the row stays locked until the transaction ends, so a
    /// concurrent writer waits instead of acting on what this one read); nothing on SQLite,
    /// whose write transaction already holds the whole database.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE",
        }
    }

    /// [`Dialect::for_update`] for the rows of one table of a join.
    pub fn for_update_of(self, table: &str) -> String {
        match self {
            Dialect::Sqlite => String::new(),
            Dialect::Postgres => format!(" FOR UPDATE OF {table}"),
        }
    }

    /// The larger of two integer expressions.
    pub fn greatest(self, a: &str, b: &str) -> String {
        match self {
            Dialect::Sqlite => format!("MAX({a}, {b})"),
            Dialect::Postgres => format!("GREATEST({a}, {b})"),
        }
    }

    /// A subquery of the text values of a JSON array bound at this `?`.
    pub fn json_text_array(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SELECT value FROM json_each(?)",
            Dialect::Postgres => "SELECT jsonb_array_elements_text(CAST(? AS jsonb))",
        }
    }

    /// A subquery of the integers of a JSON array bound at this `?`.
    pub fn json_int_array(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SELECT value FROM json_each(?)",
            Dialect::Postgres => "SELECT CAST(jsonb_array_elements_text(CAST(? AS jsonb)) AS bigint)",
        }
    }
}

/// A pool of either backend. Cheap to clone.
#[derive(Clone, Debug)]
pub enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Pool {
    pub fn dialect(&self) -> Dialect {
        match self {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(_) => Dialect::Postgres,
        }
    }

    pub async fn acquire(&self) -> Result<Conn, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(p) => Conn::Sqlite(p.acquire().await?),
            Pool::Postgres(p) => Conn::Postgres(p.acquire().await?),
        })
    }

    /// A transaction that only reads (one snapshot for several statements).
    pub async fn begin_read(&self) -> Result<Transaction, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(p) => Transaction::Sqlite(p.begin().await?),
            Pool::Postgres(p) => {
                Transaction::Postgres(p.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ").await?)
            }
        })
    }

    /// A transaction for a read-then-write outside the engine's writer (profiles, accounts,
    /// roles): what it reads stays true until it commits. SQLite: `BEGIN IMMEDIATE` takes the
    /// database's write lock at once. PostgreSQL: a transaction-scoped advisory lock that every
    /// such transaction takes first, so they run one at a time across every replica.
    pub async fn begin_write(&self) -> Result<Transaction, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(p) => Transaction::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Postgres(p) => {
                let mut tx = p.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(WRITE_LOCK)
                    .execute(&mut *tx)
                    .await?;
                Transaction::Postgres(tx)
            }
        })
    }

    pub async fn close(&self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

/// The advisory lock key of [`Pool::begin_write`] ("recourse" in ASCII, as a number).
const WRITE_LOCK: i64 = 0x7265_636f_7572_7365;

/// A connection taken from a [`Pool`] for as long as it is held.
pub enum Conn {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

/// An open transaction of a [`Pool`]; dropping it rolls back.
pub enum Transaction {
    Sqlite(sqlx::Transaction<'static, Sqlite>),
    Postgres(sqlx::Transaction<'static, Postgres>),
}

impl Transaction {
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Transaction::Sqlite(t) => t.commit().await,
            Transaction::Postgres(t) => t.commit().await,
        }
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Transaction::Sqlite(t) => t.rollback().await,
            Transaction::Postgres(t) => t.rollback().await,
        }
    }
}

/// Where a statement runs: a pool (any connection) or one connection (inside a transaction).
pub enum Exec<'e> {
    SqlitePool(&'e SqlitePool),
    PgPool(&'e PgPool),
    Sqlite(&'e mut SqliteConnection),
    Postgres(&'e mut PgConnection),
}

impl Exec<'_> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Exec::SqlitePool(_) | Exec::Sqlite(_) => Dialect::Sqlite,
            Exec::PgPool(_) | Exec::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The same place, borrowed again (to run several statements on one connection).
    pub fn by_ref(&mut self) -> Exec<'_> {
        match self {
            Exec::SqlitePool(p) => Exec::SqlitePool(p),
            Exec::PgPool(p) => Exec::PgPool(p),
            Exec::Sqlite(c) => Exec::Sqlite(c),
            Exec::Postgres(c) => Exec::Postgres(c),
        }
    }
}

impl<'e> From<&'e Pool> for Exec<'e> {
    fn from(p: &'e Pool) -> Exec<'e> {
        match p {
            Pool::Sqlite(p) => Exec::SqlitePool(p),
            Pool::Postgres(p) => Exec::PgPool(p),
        }
    }
}

impl<'e> From<&'e mut Conn> for Exec<'e> {
    fn from(c: &'e mut Conn) -> Exec<'e> {
        match c {
            Conn::Sqlite(c) => Exec::Sqlite(c),
            Conn::Postgres(c) => Exec::Postgres(c),
        }
    }
}

impl<'e> From<&'e mut Transaction> for Exec<'e> {
    fn from(t: &'e mut Transaction) -> Exec<'e> {
        match t {
            Transaction::Sqlite(t) => Exec::Sqlite(t),
            Transaction::Postgres(t) => Exec::Postgres(t),
        }
    }
}

impl<'a, 'e> From<&'a mut Exec<'e>> for Exec<'a> {
    fn from(e: &'a mut Exec<'e>) -> Exec<'a> {
        e.by_ref()
    }
}

/// Statements without values, sent together in one round trip (PostgreSQL's simple query
/// protocol; SQLite runs them one after another).
/// (A `&str` carries no arguments, which is what makes sqlx send it unprepared.)
pub async fn batch<'e>(sql: &'e str, ex: impl Into<Exec<'e>>) -> Result<(), sqlx::Error> {
    use sqlx::Executor;
    match ex.into() {
        Exec::SqlitePool(p) => p.execute(sql).await.map(drop),
        Exec::Sqlite(c) => c.execute(sql).await.map(drop),
        Exec::PgPool(p) => p.execute(sql).await.map(drop),
        Exec::Postgres(c) => c.execute(sql).await.map(drop),
    }
}

/// A value bound to a `?`.
#[derive(Debug, Clone, PartialEq)]
pub enum Bind {
    Text(Option<String>),
    Int(Option<i64>),
    Bytes(Option<Vec<u8>>),
    Bool(Option<bool>),
}

macro_rules! bind_from {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {
        $(impl From<$t> for Bind {
            fn from($v: $t) -> Bind {
                $e
            }
        })*
    };
}

bind_from! {
    &str => |v| Bind::Text(Some(v.to_owned())),
    String => |v| Bind::Text(Some(v)),
    &String => |v| Bind::Text(Some(v.clone())),
    Option<&str> => |v| Bind::Text(v.map(str::to_owned)),
    Option<String> => |v| Bind::Text(v),
    &Option<String> => |v| Bind::Text(v.clone()),
    i64 => |v| Bind::Int(Some(v)),
    i32 => |v| Bind::Int(Some(i64::from(v))),
    u32 => |v| Bind::Int(Some(i64::from(v))),
    Option<i64> => |v| Bind::Int(v),
    bool => |v| Bind::Bool(Some(v)),
    Option<bool> => |v| Bind::Bool(v),
    Vec<u8> => |v| Bind::Bytes(Some(v)),
    &[u8] => |v| Bind::Bytes(Some(v.to_vec())),
}

/// A value both drivers decode.
pub trait Value:
    for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres> + Send
{
}

impl<T> Value for T where
    T: for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres> + Send
{
}

/// A column index both drivers take (a name or a position).
pub trait Index: ColumnIndex<SqliteRow> + ColumnIndex<PgRow> {}

impl<I: ColumnIndex<SqliteRow> + ColumnIndex<PgRow>> Index for I {}

/// A result row of either backend.
pub enum Row {
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

impl Row {
    pub fn try_get<T: Value, I: Index>(&self, index: I) -> Result<T, sqlx::Error> {
        match self {
            Row::Sqlite(r) => r.try_get(index),
            Row::Postgres(r) => r.try_get(index),
        }
    }
}

/// One statement and its values.
#[must_use]
pub struct Query<'s> {
    sql: Cow<'s, str>,
    binds: Vec<Bind>,
    /// Whether the connection keeps the prepared statement for the next run of the same text.
    persistent: bool,
}

/// A statement with `?` marks.
pub fn query<'s>(sql: impl Into<Cow<'s, str>>) -> Query<'s> {
    Query {
        sql: sql.into(),
        binds: Vec::new(),
        persistent: true,
    }
}

impl<'s> Query<'s> {
    /// A text built for one run (a batch of statements, a list of values spelled out): the
    /// connection does not keep it prepared. Each connection keeps a bounded number of
    /// statements (least recently used out); texts that never come back would push out the
    /// ones that do, which would then be parsed again at every run.
    pub fn once(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// The value of the next `?`.
    pub fn bind(mut self, v: impl Into<Bind>) -> Self {
        self.binds.push(v.into());
        self
    }

    /// Every value, in the order of the `?` marks.
    pub fn bind_all(mut self, binds: impl IntoIterator<Item = Bind>) -> Self {
        self.binds.extend(binds);
        self
    }

    /// Every `?` has a value and every value a `?` (SQLite would bind a missing one as NULL).
    fn check(&self) -> Result<(), sqlx::Error> {
        let marks = marks(&self.sql);
        if marks == self.binds.len() {
            Ok(())
        } else {
            Err(sqlx::Error::Protocol(format!(
                "a statement has {marks} `?` marks and {} values",
                self.binds.len()
            )))
        }
    }

    /// Runs it; how many rows it changed.
    pub async fn execute<'e>(self, ex: impl Into<Exec<'e>>) -> Result<u64, sqlx::Error> {
        self.check()?;
        match ex.into() {
            Exec::SqlitePool(p) => Ok(self.sqlite().execute(p).await?.rows_affected()),
            Exec::Sqlite(c) => Ok(self.sqlite().execute(c).await?.rows_affected()),
            Exec::PgPool(p) => {
                let sql = numbered(&self.sql);
                Ok(pg(&sql, self.binds, self.persistent)?
                    .execute(p)
                    .await?
                    .rows_affected())
            }
            Exec::Postgres(c) => {
                let sql = numbered(&self.sql);
                Ok(pg(&sql, self.binds, self.persistent)?
                    .execute(c)
                    .await?
                    .rows_affected())
            }
        }
    }

    pub async fn fetch_all<'e>(self, ex: impl Into<Exec<'e>>) -> Result<Vec<Row>, sqlx::Error> {
        self.check()?;
        Ok(match ex.into() {
            Exec::SqlitePool(p) => self
                .sqlite()
                .fetch_all(p)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Exec::Sqlite(c) => self
                .sqlite()
                .fetch_all(c)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Exec::PgPool(p) => {
                let sql = numbered(&self.sql);
                pg(&sql, self.binds, self.persistent)?
                    .fetch_all(p)
                    .await?
                    .into_iter()
                    .map(Row::Postgres)
                    .collect()
            }
            Exec::Postgres(c) => {
                let sql = numbered(&self.sql);
                pg(&sql, self.binds, self.persistent)?
                    .fetch_all(c)
                    .await?
                    .into_iter()
                    .map(Row::Postgres)
                    .collect()
            }
        })
    }

    pub async fn fetch_optional<'e>(self, ex: impl Into<Exec<'e>>) -> Result<Option<Row>, sqlx::Error> {
        self.check()?;
        Ok(match ex.into() {
            Exec::SqlitePool(p) => self.sqlite().fetch_optional(p).await?.map(Row::Sqlite),
            Exec::Sqlite(c) => self.sqlite().fetch_optional(c).await?.map(Row::Sqlite),
            Exec::PgPool(p) => {
                let sql = numbered(&self.sql);
                pg(&sql, self.binds, self.persistent)?
                    .fetch_optional(p)
                    .await?
                    .map(Row::Postgres)
            }
            Exec::Postgres(c) => {
                let sql = numbered(&self.sql);
                pg(&sql, self.binds, self.persistent)?
                    .fetch_optional(c)
                    .await?
                    .map(Row::Postgres)
            }
        })
    }

    pub async fn fetch_one<'e>(self, ex: impl Into<Exec<'e>>) -> Result<Row, sqlx::Error> {
        self.fetch_optional(ex).await?.ok_or(sqlx::Error::RowNotFound)
    }

    /// The first column of the one row.
    pub async fn scalar<'e, T: Value>(self, ex: impl Into<Exec<'e>>) -> Result<T, sqlx::Error> {
        self.fetch_one(ex).await?.try_get(0)
    }

    /// The first column of the row, if there is one.
    pub async fn scalar_optional<'e, T: Value>(
        self,
        ex: impl Into<Exec<'e>>,
    ) -> Result<Option<T>, sqlx::Error> {
        self.fetch_optional(ex).await?.map(|r| r.try_get(0)).transpose()
    }

    /// The first column of every row.
    pub async fn scalars<'e, T: Value>(self, ex: impl Into<Exec<'e>>) -> Result<Vec<T>, sqlx::Error> {
        self.fetch_all(ex).await?.iter().map(|r| r.try_get(0)).collect()
    }

    fn sqlite(&self) -> sqlx::query::Query<'_, Sqlite, SqliteArguments<'_>> {
        let mut q = sqlx::query::<Sqlite>(&self.sql).persistent(self.persistent);
        for b in &self.binds {
            q = match b {
                Bind::Text(v) => q.bind(v.as_deref()),
                Bind::Int(v) => q.bind(*v),
                Bind::Bytes(v) => q.bind(v.as_deref()),
                Bind::Bool(v) => q.bind(*v),
            };
        }
        q
    }
}

fn pg(
    sql: &str,
    binds: Vec<Bind>,
    persistent: bool,
) -> Result<sqlx::query::Query<'_, Postgres, PgArguments>, sqlx::Error> {
    let mut args = PgArguments::default();
    for b in binds {
        match b {
            Bind::Text(v) => args.add(v),
            Bind::Int(v) => args.add(v),
            Bind::Bytes(v) => args.add(v),
            Bind::Bool(v) => args.add(v),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(sqlx::query_with(sql, args).persistent(persistent))
}

/// How many `?` marks `sql` has outside quoted text.
fn marks(sql: &str) -> usize {
    let mut n = 0;
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '?') => n += 1,
            (None, _) => {}
        }
    }
    n
}

/// `?` marks as PostgreSQL's `$1, $2, …`, leaving quoted text and identifiers alone.
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0u32;
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            (None, c) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_marks_are_numbered_outside_quotes() {
        assert_eq!(
            numbered("UPDATE t SET a = ?, b = '?' WHERE c = ? RETURNING '#cas', \"x?\""),
            "UPDATE t SET a = $1, b = '?' WHERE c = $2 RETURNING '#cas', \"x?\""
        );
        assert_eq!(numbered("SELECT 'it''s ?' , ?"), "SELECT 'it''s ?' , $1");
        assert_eq!(numbered("no marks"), "no marks");
    }

    #[test]
    fn a_statement_whose_marks_and_values_differ_is_refused_before_it_runs() {
        assert!(query("SELECT ?, '?'").bind(1i64).check().is_ok());
        assert!(query("SELECT ?, ?").bind(1i64).check().is_err());
        assert!(query("SELECT 1").bind(1i64).check().is_err());
    }
}
