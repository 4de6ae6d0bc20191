-- PostgreSQL mirror of migrations/sqlite/20261201090000_add_timer_payload.sql (same version).
--
-- A timer may carry what it delivers: a dispatcher's scheduled report (kind `report`) holds the
-- report itself (success, or the evidence envelope), so it survives a restart unchanged.
ALTER TABLE timers ADD COLUMN payload TEXT;
