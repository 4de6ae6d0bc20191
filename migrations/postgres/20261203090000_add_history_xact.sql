-- PostgreSQL side of migrations/sqlite/20261203090000_add_history_xact.sql (same version).
--
-- The history table is the event log every replica reads (server/src/store/events.rs): each
-- row records the transaction that wrote it, and a reader takes rows in commit order by
-- delivering only those whose transaction lies below its snapshot's xmin (every transaction
-- there has finished), ordered by (xact_id, route_id, seq). `pg_current_xact_id()` is the
-- writing transaction's top-level id (a 64-bit xid8, never wrapping). Rows written before this
-- migration get the migrating transaction's id, which is below every later writer's: they are
-- history, never replayed as events (a reader starts at the horizon of the moment it starts).
ALTER TABLE route_history ADD COLUMN xact_id xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX route_history_by_xact ON route_history (xact_id, route_id, seq);
