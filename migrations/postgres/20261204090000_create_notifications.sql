-- PostgreSQL mirror of migrations/sqlite/20261204090000_create_notifications.sql (same
-- version, same tables, columns and column order; INTEGER -> BIGINT, AUTOINCREMENT -> identity).
--
-- A profile's rules (policy::notify::NotificationRule, as JSON) are part of the profile and of
-- each of its revisions.
ALTER TABLE profiles ADD COLUMN notifications_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE profile_revisions ADD COLUMN notifications_json TEXT NOT NULL DEFAULT '[]';

-- One row per event worth telling, written in the same transaction as the route transition
-- that caused it. `id` is the idempotency key (the webhook's `webhook-id`); `payload` the JSON
-- body every channel is built from, never evidence text or a secret. `seq` orders a route's
-- events (a route's transitions are serialized by its row lock, so their events take
-- increasing values).
CREATE TABLE notify_events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    type       TEXT NOT NULL,
    route_id   TEXT NOT NULL,
    profile_id TEXT NOT NULL,
    at         TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    payload    TEXT NOT NULL,
    in_app     BIGINT NOT NULL DEFAULT 0 CHECK (in_app IN (0, 1))
);
CREATE INDEX notify_events_in_app ON notify_events (seq) WHERE in_app = 1;

-- One delivery of an event to one configured channel; claimed with a lease in database time
-- (`FOR UPDATE SKIP LOCKED`, as timers are), only the head of each (channel, route).
CREATE TABLE notify_deliveries (
    event_seq      BIGINT NOT NULL REFERENCES notify_events (seq) ON DELETE CASCADE,
    channel_id     TEXT NOT NULL,
    route_id       TEXT NOT NULL,
    status         TEXT NOT NULL,
    attempts       BIGINT NOT NULL DEFAULT 0,
    due_ms         BIGINT NOT NULL,
    lease_owner    TEXT,
    lease_until_ms BIGINT,
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
    through_seq BIGINT NOT NULL
);
