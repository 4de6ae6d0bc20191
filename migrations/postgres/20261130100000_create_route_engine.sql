-- PostgreSQL mirror of migrations/sqlite/20261130100000_create_route_engine.sql (same version,
-- same tables, columns and column order). Translation: INTEGER -> BIGINT (Rust binds and reads
-- i64), AUTOINCREMENT rowid -> identity, WITHOUT ROWID dropped, SQLite triggers -> PL/pgSQL.
--
-- The route engine's durable state. Times shown to people are RFC 3339 UTC text; times the
-- engine orders by (deadlines, timers) are integer Unix milliseconds, indexed.

-- Dynamic profiles: the current revision, with its targets and normalized v1 document.
CREATE TABLE profiles (
    id                     TEXT PRIMARY KEY NOT NULL,
    name                   TEXT NOT NULL,
    description            TEXT,
    revision               BIGINT NOT NULL,
    candidates_json        TEXT NOT NULL,
    policy_json            TEXT NOT NULL,
    normalized_from_legacy BIGINT NOT NULL DEFAULT 0,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL
);

-- Every revision of every profile, as written (versioned policy documents).
CREATE TABLE profile_revisions (
    profile_id      TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    revision        BIGINT NOT NULL,
    candidates_json TEXT NOT NULL,
    policy_json     TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (profile_id, revision)
);

-- One logical dynamic session per caller invocation. `state_json` is the serialized
-- policy::route::RouteState (authoritative); the other state columns are copies for indexes.
CREATE TABLE routes (
    id               TEXT PRIMARY KEY NOT NULL,
    profile_id       TEXT NOT NULL REFERENCES profiles(id),
    caller_kind      TEXT NOT NULL,
    caller_reference TEXT NOT NULL,
    invocation_id    TEXT NOT NULL,
    title            TEXT,
    state            TEXT NOT NULL,
    generation       BIGINT NOT NULL,
    candidate_id     TEXT NOT NULL,
    deadline_ms      BIGINT,
    state_json       TEXT NOT NULL,
    durable_error    TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    UNIQUE (caller_kind, invocation_id)
);
CREATE INDEX routes_by_state ON routes(state);
CREATE INDEX routes_by_profile ON routes(profile_id);
CREATE INDEX routes_by_caller ON routes(caller_kind, caller_reference);
CREATE INDEX routes_by_deadline ON routes(deadline_ms) WHERE deadline_ms IS NOT NULL;
CREATE INDEX routes_by_updated ON routes(updated_at);

-- Append-only attempt history: one row per accepted transition, with the decision (and its
-- policy snapshot) and the classification as they were.
CREATE TABLE route_history (
    route_id            TEXT NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    seq                 BIGINT NOT NULL,
    at                  TEXT NOT NULL,
    event               TEXT NOT NULL,
    from_state          TEXT,
    to_state            TEXT NOT NULL,
    generation          BIGINT NOT NULL,
    candidate_id        TEXT NOT NULL,
    attempt             BIGINT,
    profile_revision    BIGINT NOT NULL,
    decision_json       TEXT,
    classification_json TEXT,
    PRIMARY KEY (route_id, seq)
);

-- As in SQLite, only UPDATE is refused (rows still go with their route, ON DELETE CASCADE).
-- SQLSTATE 23000 (integrity_constraint_violation), like SQLite's RAISE(ABORT) in a trigger.
CREATE FUNCTION route_history_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'route_history is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER route_history_is_append_only_update BEFORE UPDATE ON route_history
    FOR EACH ROW EXECUTE FUNCTION route_history_is_append_only();

-- One record per attempt: scheduled (provably not started), started, settled.
CREATE TABLE dispatches (
    route_id              TEXT NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    attempt               BIGINT NOT NULL,
    candidate_id          TEXT NOT NULL,
    kind                  TEXT NOT NULL,
    dispatcher            TEXT NOT NULL,
    scheduled_generation  BIGINT NOT NULL,
    invocation_generation BIGINT,
    status                TEXT NOT NULL,
    outcome               TEXT,
    scheduled_at          TEXT NOT NULL,
    started_at            TEXT,
    settled_at            TEXT,
    PRIMARY KEY (route_id, attempt)
);
CREATE INDEX dispatches_unsettled ON dispatches(status) WHERE status <> 'settled';

-- Durable timers, at most one per route. `deadline`: fire DeadlineReached for `generation`.
-- `circuit_hold`: re-check a pending dispatch held by an open circuit.
CREATE TABLE timers (
    route_id   TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    generation BIGINT NOT NULL,
    due_ms     BIGINT NOT NULL
);
CREATE INDEX timers_by_due ON timers(due_ms);

-- Shared resource circuits, keyed `provider:<p>`, `account:<p>` or `model:<p>/<m>`.
CREATE TABLE circuits (
    key            TEXT PRIMARY KEY NOT NULL,
    state          TEXT NOT NULL,
    open_until_ms  BIGINT,
    failures       BIGINT NOT NULL DEFAULT 0,
    code           TEXT,
    probe_route_id TEXT,
    updated_at     TEXT NOT NULL
);

-- What the simulated dispatcher actually launched (audit; tests count duplicates here).
-- `id` is never inserted explicitly (store/writes.rs), so ALWAYS; like AUTOINCREMENT, an
-- identity never hands out a value twice.
CREATE TABLE simulated_launches (
    id                    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    route_id              TEXT NOT NULL,
    attempt               BIGINT NOT NULL,
    invocation_generation BIGINT NOT NULL,
    launched_at           TEXT NOT NULL
);
CREATE INDEX simulated_launches_by_route ON simulated_launches(route_id, attempt);
