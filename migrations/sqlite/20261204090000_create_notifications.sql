-- Notifications (server/src/notify/): a profile's rules, and the durable outbox.
--
-- A profile's rules (policy::notify::NotificationRule, as JSON) are part of the profile and of
-- each of its revisions.
ALTER TABLE profiles ADD COLUMN notifications_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE profile_revisions ADD COLUMN notifications_json TEXT NOT NULL DEFAULT '[]';

-- One row per event worth telling, written in the same transaction as the route transition
-- that caused it. `id` is the idempotency key (the webhook's `webhook-id`); `payload` the JSON
-- body every channel is built from (`{"type", "timestamp", "data"}`), never evidence text or a
-- secret. `in_app`: shown in the notification list of the UI. `seq` orders a route's events.
CREATE TABLE notify_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    type       TEXT NOT NULL,
    route_id   TEXT NOT NULL,
    profile_id TEXT NOT NULL,
    at         TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    payload    TEXT NOT NULL,
    in_app     INTEGER NOT NULL DEFAULT 0 CHECK (in_app IN (0, 1))
);
CREATE INDEX notify_events_in_app ON notify_events (seq) WHERE in_app = 1;

-- One delivery of an event to one configured channel (a webhook or an e-mail channel).
-- `status`: `pending` until a receiver took it (`delivered`) or the last attempt failed
-- (`dead`). A worker claims a due pending row with a lease (`lease_owner`, `lease_until_ms`,
-- on the database's clock with replicas): only the head of a (channel, route) is claimed, so
-- a route's events reach a channel in order. `last_error` is what went wrong, in our words
-- (a status code, a timeout, a refused address), never a receiver's answer.
CREATE TABLE notify_deliveries (
    event_seq      INTEGER NOT NULL REFERENCES notify_events (seq) ON DELETE CASCADE,
    channel_id     TEXT NOT NULL,
    route_id       TEXT NOT NULL,
    status         TEXT NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    due_ms         INTEGER NOT NULL,
    lease_owner    TEXT,
    lease_until_ms INTEGER,
    last_error     TEXT,
    settled_at     TEXT,
    PRIMARY KEY (event_seq, channel_id)
);
CREATE INDEX notify_deliveries_due ON notify_deliveries (due_ms) WHERE status = 'pending';
CREATE INDEX notify_deliveries_order ON notify_deliveries (channel_id, route_id, event_seq)
    WHERE status = 'pending';
CREATE INDEX notify_deliveries_dead ON notify_deliveries (event_seq) WHERE status = 'dead';

-- How far each person has read the in-app list (the highest `seq` they marked read).
CREATE TABLE notify_reads (
    account_id  TEXT PRIMARY KEY NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    through_seq INTEGER NOT NULL
);
