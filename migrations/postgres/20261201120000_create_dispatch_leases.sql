-- PostgreSQL mirror of migrations/sqlite/20261201120000_create_dispatch_leases.sql (same
-- version; INTEGER -> BIGINT, `acked` stays a 0/1 integer since Rust reads it as i64).
--
-- Leases of external runners (the `external` dispatcher): a runner claims a started attempt,
-- acknowledges it when it starts the work, and heartbeats. One lease per route (its current
-- attempt). A claim that is never acknowledged lapses and the attempt is offered again; an
-- acknowledged lease that runs out makes the attempt ambiguous (a `lease` timer fires it).
CREATE TABLE dispatch_leases (
    route_id     TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    attempt      BIGINT NOT NULL,
    generation   BIGINT NOT NULL,
    lease_id     TEXT NOT NULL,
    runner       TEXT NOT NULL,
    acked        BIGINT NOT NULL DEFAULT 0,
    expires_ms   BIGINT NOT NULL,
    claimed_at   TEXT NOT NULL,
    heartbeat_at TEXT
);
