-- Nothing to change on SQLite; this file exists because both backends carry the same migration
-- versions (server/src/db.rs holds the lists equal).
--
-- On PostgreSQL this version records each history row's transaction id, so that every replica
-- can read the history table as its event log in commit order. A SQLite database has one
-- serving process: its engine sends each change to its live pages straight after the commit,
-- and reads no event log.
SELECT 1;
