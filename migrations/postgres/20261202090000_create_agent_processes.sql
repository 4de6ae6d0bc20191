-- PostgreSQL mirror of migrations/sqlite/20261202090000_create_agent_processes.sql (same
-- version; INTEGER -> BIGINT). `pgid` is a rowid alias in SQLite but always inserted explicitly
-- (store/agents.rs) and never generated, so here it is a plain BIGINT key, not an identity.
--
-- ACP agent processes Recourse started and has not yet seen exit, one row per process group,
-- so a restart after a crash of Recourse can stop what the previous process left running.
-- `start_ticks` is the process's start time (field 22 of /proc/<pid>/stat, clock ticks since
-- boot) and `boot_id` the kernel's boot id: together they tell a recorded process from a
-- later one that reuses its pid. Bookkeeping, not route state: written outside the engine's
-- writer, deleted when the process is gone.
CREATE TABLE agent_processes (
    pgid        BIGINT PRIMARY KEY NOT NULL,
    start_ticks BIGINT NOT NULL,
    boot_id     TEXT NOT NULL,
    route_id    TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    agent_id    TEXT NOT NULL,
    started_at  TEXT NOT NULL
);
