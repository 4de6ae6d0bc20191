-- The delivery worker's claim reads pending deliveries oldest event first and stops after a
-- few dozen heads (`server/src/store/notify/deliveries.rs`). Without an index in that order, every claim
-- read every pending delivery and sorted them (SQLite; with an older planner it walked the
-- primary key from the first delivery ever made). The index also carries the due time, which is
-- what the worker's "when is the next one due" reads (a scan of the pending deliveries only),
-- so the index on the due time alone goes: a delivery's insert and settlement keep touching
-- three indexes, not four.
CREATE INDEX notify_deliveries_pending ON notify_deliveries (event_seq, due_ms) WHERE status = 'pending';
DROP INDEX notify_deliveries_due;
