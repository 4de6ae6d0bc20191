-- Accounts, custom roles, API tokens, the audit log and browser sessions (issue 13).

-- People who sign in. Names are unique without regard to case. `role` is a built-in role's
-- name (fixed in code: policy::auth::BuiltinRole) or a custom role's (table `roles`).
-- `credentials_ms`: when the password last changed (strictly increasing); a session keeps the
-- value it signed in under and ends when the value changes.
CREATE TABLE accounts (
    id             TEXT PRIMARY KEY NOT NULL,
    name           TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash  TEXT NOT NULL,
    role           TEXT NOT NULL,
    disabled       INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    demo           INTEGER NOT NULL DEFAULT 0 CHECK (demo IN (0, 1)),
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    credentials_ms INTEGER NOT NULL
);

-- Custom roles: named sets of permissions (a JSON array of permission names).
CREATE TABLE roles (
    name        TEXT PRIMARY KEY NOT NULL COLLATE NOCASE,
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
    expires_ms   INTEGER NOT NULL,
    last_used_ms INTEGER,
    revoked_ms   INTEGER
);
CREATE INDEX api_tokens_by_account ON api_tokens (account_id);

-- Who did what, when, from where. Append-only: the triggers refuse every change.
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         TEXT NOT NULL,
    actor_kind TEXT NOT NULL,
    actor      TEXT,
    address    TEXT,
    action     TEXT NOT NULL,
    target     TEXT,
    detail     TEXT NOT NULL
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

-- Browser sessions, as tower-sessions-sqlx-store's SqliteStore reads and writes them (its
-- own `migrate()` would create the same table; the schema lives here with the others).
CREATE TABLE tower_sessions (
    id          TEXT PRIMARY KEY NOT NULL,
    data        BLOB NOT NULL,
    expiry_date INTEGER NOT NULL
);
