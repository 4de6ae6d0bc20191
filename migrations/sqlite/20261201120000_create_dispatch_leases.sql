-- Leases of external runners (the `external` dispatcher): a runner claims a started attempt,
-- acknowledges it when it starts the work, and heartbeats. One lease per route (its current
-- attempt). A claim that is never acknowledged lapses and the attempt is offered again; an
-- acknowledged lease that runs out makes the attempt ambiguous (a `lease` timer fires it).
CREATE TABLE dispatch_leases (
    route_id     TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    generation   INTEGER NOT NULL,
    lease_id     TEXT NOT NULL,
    runner       TEXT NOT NULL,
    acked        INTEGER NOT NULL DEFAULT 0,
    expires_ms   INTEGER NOT NULL,
    claimed_at   TEXT NOT NULL,
    heartbeat_at TEXT
);
