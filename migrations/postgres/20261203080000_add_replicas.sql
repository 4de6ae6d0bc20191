-- PostgreSQL mirror of migrations/sqlite/20261203080000_add_replicas.sql (same version; the
-- column order of every table is the same as SQLite's).
--
-- `replicas`: one row per running process (`instance`: the replica id and a random suffix, new
-- at every start), alive while `lease_until_ms` (database time, Unix ms) is ahead; renewed by
-- the process's heartbeat, deleted when it stops cleanly.
CREATE TABLE replicas (
    instance       TEXT PRIMARY KEY NOT NULL,
    replica_id     TEXT NOT NULL,
    host           TEXT NOT NULL,
    started_ms     BIGINT NOT NULL,
    lease_until_ms BIGINT NOT NULL
);

-- The instance that committed a route's latest transition while it is in flight (an attempt
-- pending or running in that process, or switching): it launches and watches the attempt.
-- When that instance is no longer alive, another replica takes the route up (`Restarted`).
ALTER TABLE routes ADD COLUMN owner TEXT;
CREATE INDEX routes_by_owner ON routes(owner) WHERE owner IS NOT NULL;

-- Agent processes are now kept per host and instance: a process group id is only unique on
-- its host, and only the host's own replicas can stop it (and only when the instance that
-- started it is gone).
CREATE TABLE agent_processes_by_host (
    host        TEXT NOT NULL,
    pgid        BIGINT NOT NULL,
    start_ticks BIGINT NOT NULL,
    boot_id     TEXT NOT NULL,
    route_id    TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    agent_id    TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    instance    TEXT NOT NULL,
    PRIMARY KEY (host, pgid)
);
INSERT INTO agent_processes_by_host (host, pgid, start_ticks, boot_id, route_id, attempt, agent_id, started_at, instance)
SELECT '', pgid, start_ticks, boot_id, route_id, attempt, agent_id, started_at, '' FROM agent_processes;
DROP TABLE agent_processes;
ALTER TABLE agent_processes_by_host RENAME TO agent_processes;
