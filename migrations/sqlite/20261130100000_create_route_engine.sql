-- The route engine's durable state. Times shown to people are RFC 3339 UTC text; times the
-- engine orders by (deadlines, timers) are integer Unix milliseconds, indexed.

-- Dynamic profiles: the current revision, with its targets and normalized v1 document.
CREATE TABLE profiles (
    id                     TEXT PRIMARY KEY NOT NULL,
    name                   TEXT NOT NULL,
    description            TEXT,
    revision               INTEGER NOT NULL,
    candidates_json        TEXT NOT NULL,
    policy_json            TEXT NOT NULL,
    normalized_from_legacy INTEGER NOT NULL DEFAULT 0,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL
);

-- Every revision of every profile, as written (versioned policy documents).
CREATE TABLE profile_revisions (
    profile_id      TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    revision        INTEGER NOT NULL,
    candidates_json TEXT NOT NULL,
    policy_json     TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (profile_id, revision)
) WITHOUT ROWID;

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
    generation       INTEGER NOT NULL,
    candidate_id     TEXT NOT NULL,
    deadline_ms      INTEGER,
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
    seq                 INTEGER NOT NULL,
    at                  TEXT NOT NULL,
    event               TEXT NOT NULL,
    from_state          TEXT,
    to_state            TEXT NOT NULL,
    generation          INTEGER NOT NULL,
    candidate_id        TEXT NOT NULL,
    attempt             INTEGER,
    profile_revision    INTEGER NOT NULL,
    decision_json       TEXT,
    classification_json TEXT,
    PRIMARY KEY (route_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER route_history_is_append_only_update BEFORE UPDATE ON route_history
BEGIN SELECT RAISE(ABORT, 'route_history is append-only'); END;

-- One record per attempt: scheduled (provably not started), started, settled.
CREATE TABLE dispatches (
    route_id              TEXT NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    attempt               INTEGER NOT NULL,
    candidate_id          TEXT NOT NULL,
    kind                  TEXT NOT NULL,
    dispatcher            TEXT NOT NULL,
    scheduled_generation  INTEGER NOT NULL,
    invocation_generation INTEGER,
    status                TEXT NOT NULL,
    outcome               TEXT,
    scheduled_at          TEXT NOT NULL,
    started_at            TEXT,
    settled_at            TEXT,
    PRIMARY KEY (route_id, attempt)
) WITHOUT ROWID;
CREATE INDEX dispatches_unsettled ON dispatches(status) WHERE status <> 'settled';

-- Durable timers, at most one per route. `deadline`: fire DeadlineReached for `generation`.
-- `circuit_hold`: re-check a pending dispatch held by an open circuit.
CREATE TABLE timers (
    route_id   TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    generation INTEGER NOT NULL,
    due_ms     INTEGER NOT NULL
);
CREATE INDEX timers_by_due ON timers(due_ms);

-- Shared resource circuits, keyed `provider:<p>`, `account:<p>` or `model:<p>/<m>`.
CREATE TABLE circuits (
    key            TEXT PRIMARY KEY NOT NULL,
    state          TEXT NOT NULL,
    open_until_ms  INTEGER,
    failures       INTEGER NOT NULL DEFAULT 0,
    code           TEXT,
    probe_route_id TEXT,
    updated_at     TEXT NOT NULL
);

-- What the simulated dispatcher actually launched (audit; tests count duplicates here).
CREATE TABLE simulated_launches (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    route_id              TEXT NOT NULL,
    attempt               INTEGER NOT NULL,
    invocation_generation INTEGER NOT NULL,
    launched_at           TEXT NOT NULL
);
CREATE INDEX simulated_launches_by_route ON simulated_launches(route_id, attempt);
