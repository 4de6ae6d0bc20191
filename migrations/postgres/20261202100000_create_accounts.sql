-- PostgreSQL mirror of migrations/sqlite/20261202100000_create_accounts.sql (same version, same
-- tables and column order). Translation: INTEGER -> BIGINT (the 0/1 flags stay integers, Rust
-- reads them as i64; their CHECKs are kept), AUTOINCREMENT -> identity, SQLite triggers ->
-- PL/pgSQL, COLLATE NOCASE -> the `nocase` collation created below. The browser-session table is
-- PostgresStore's own (schema `tower_sessions`, table `session`), not SQLite's `tower_sessions`.
--
-- Accounts, custom roles, API tokens, the audit log and browser sessions (issue 13).

-- SQLite's NOCASE, so the same SQL text works on both databases: an unquoted `COLLATE NOCASE`
-- in a query folds to `nocase` and finds this collation. ICU, case-insensitive (strength 2:
-- case ignored, accents not), nondeterministic so that `=` and UNIQUE ignore case. Unlike
-- SQLite's NOCASE (ASCII only) it folds every script's case, and it orders linguistically.
-- LIKE is not supported on columns with this collation (PostgreSQL 15); none is used.
CREATE COLLATION nocase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);

-- People who sign in. Names are unique without regard to case. `role` is a built-in role's
-- name (fixed in code: policy::auth::BuiltinRole) or a custom role's (table `roles`).
-- `credentials_ms`: when the password last changed (strictly increasing); a session keeps the
-- value it signed in under and ends when the value changes.
CREATE TABLE accounts (
    id             TEXT PRIMARY KEY NOT NULL,
    name           TEXT COLLATE nocase NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    role           TEXT NOT NULL,
    disabled       BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    demo           BIGINT NOT NULL DEFAULT 0 CHECK (demo IN (0, 1)),
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    credentials_ms BIGINT NOT NULL
);

-- Custom roles: named sets of permissions (a JSON array of permission names).
CREATE TABLE roles (
    name        TEXT COLLATE nocase PRIMARY KEY NOT NULL,
    permissions TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

-- API tokens. Only the SHA-256 of the secret is kept. A token acts for its account and never
-- beyond it: its permissions are intersected with the account's role on every request.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY NOT NULL,
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    name         TEXT NOT NULL,
    secret_hash  TEXT NOT NULL UNIQUE,
    permissions  TEXT NOT NULL,
    profile_ids  TEXT,
    created_at   TEXT NOT NULL,
    expires_ms   BIGINT NOT NULL,
    last_used_ms BIGINT,
    revoked_ms   BIGINT
);
CREATE INDEX api_tokens_by_account ON api_tokens (account_id);

-- Who did what, when, from where. Append-only: the triggers refuse every change. `seq` is
-- never inserted explicitly (store/audit.rs), so ALWAYS; an identity never reuses a value.
CREATE TABLE audit_log (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         TEXT NOT NULL,
    actor_kind TEXT NOT NULL,
    actor      TEXT,
    address    TEXT,
    action     TEXT NOT NULL,
    target     TEXT,
    detail     TEXT NOT NULL
);
-- SQLSTATE 23000 (integrity_constraint_violation), like SQLite's RAISE(ABORT) in a trigger.
CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();
-- PostgreSQL only (SQLite has no TRUNCATE): row triggers do not see TRUNCATE, so refuse it too.
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_is_append_only();

-- Browser sessions, as tower-sessions-sqlx-store 0.15's PostgresStore reads and writes them
-- with its defaults (`PostgresStore::new(pool)`: schema `tower_sessions`, table `session`).
-- This is exactly what its own `migrate()` creates (it uses IF NOT EXISTS, so calling it after
-- this migration is harmless); the schema lives here with the others. `expiry_date` is a
-- timestamptz here (the SQLite store keeps Unix seconds in an INTEGER).
CREATE SCHEMA IF NOT EXISTS tower_sessions;
CREATE TABLE IF NOT EXISTS tower_sessions.session (
    id          TEXT PRIMARY KEY NOT NULL,
    data        BYTEA NOT NULL,
    expiry_date TIMESTAMPTZ NOT NULL
);
