-- The delivery worker's claim reads pending deliveries oldest event first and stops after a
-- few dozen heads (`server/src/store/notify.rs`). Without an index in that order, SQLite walked
-- the primary key from the first delivery ever made, delivered ones included, at every claim:
-- the cost of a claim grew with every delivery the server had made.
CREATE INDEX notify_deliveries_pending ON notify_deliveries (event_seq) WHERE status = 'pending';
