//! The delivery worker: takes due deliveries from the outbox with a lease, sends each through
//! its channel in a task of its own, and settles it: delivered, tried again later (exponential
//! backoff with a cap, `policy::notify::DeliverySchedule`), or dead after the last attempt.
//!
//! - Woken by the engine after every commit that queued an event ([`crate::engine::Engine`]'s
//!   outbox signal), by every attempt that ends, and at least every [`POLL`] (other replicas'
//!   events, due retries).
//! - At most [`IN_FLIGHT`] attempts at once; each bounded by its channel's timeout, so a
//!   receiver that hangs holds one slot for that long and never the others: other channels
//!   and other routes go on.
//! - A route's events reach each channel in order: only the head of a (channel, route) queue is
//!   ever claimed (`store/notify/deliveries.rs`).
//! - The lease outlasts the longest attempt ([`LEASE_MARGIN`] beyond the longest channel
//!   timeout), so a live worker never loses a delivery it is sending; a replica that dies
//!   mid-delivery leaves a lease that runs out, and another replica sends it again with the
//!   same `webhook-id`. On SQLite (one serving process) the next start gives every lease back.
//! - Its writes are jobs of the engine's writer (`engine/outbox.rs`): the attempts that ended
//!   since the last job are settled and the free slots claimed again in one job, which shares
//!   its commit with the route steps queued beside it. A transition never waits for a
//!   delivery, and deliveries cost the writer statements, not commits.
//! - At a stop, attempts in flight get up to [`DRAIN`] to end and are settled; one still
//!   running after that is sent again (same `webhook-id`) when its lease is given back.
//! - At its start and every [`PRUNE_EVERY`] after, it removes the events older than
//!   `[notify] keep_days` that have nothing left to send, with their deliveries
//!   (`store/notify/retention.rs`): a few short statements of [`PRUNE_BATCH`] events, outside
//!   the writer, between its claims.

use super::DeliveryError;
use crate::{config::notify::ChannelKind, engine::outbox::Body};
use crate::{
    engine::{deliveries::DeliveryClaim, Engine},
    store::{
        new_id,
        notify::{Claimed, Settle, Settlement},
        Dialect,
    },
};
use std::{future::Future, sync::Arc, time::Duration};
use tokio::sync::mpsc;

/// Longest the worker sleeps without looking at the outbox.
pub const POLL: Duration = Duration::from_secs(1);
/// Most attempts in flight at once.
pub const IN_FLIGHT: usize = 32;
/// How much longer than the longest channel timeout a lease lasts.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// How long a stop waits for the attempts in flight to end before it settles them.
pub const DRAIN: Duration = Duration::from_secs(2);
/// How often the worker removes the events the outbox no longer needs.
pub const PRUNE_EVERY: chrono::TimeDelta = chrono::TimeDelta::hours(1);
/// Most events one prune statement removes (each statement its own short transaction).
pub const PRUNE_BATCH: u32 = 500;
/// Most prune statements in a row; more left than that is removed at the next turn of the loop,
/// after the worker claimed and settled what was due.
const PRUNE_BATCHES: u32 = 20;

/// Runs the worker until `stop` resolves, then settles what ends within [`DRAIN`].
pub async fn run(engine: Arc<Engine>, stop: impl Future<Output = ()>) {
    let store = engine.store().clone();
    if store.dialect() == Dialect::Sqlite {
        match store.release_delivery_leases().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                deliveries = n,
                "notification deliveries in flight at the last stop are sent again"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot give back the notification leases of the last run"),
        }
    }
    let clients = Clients::default();
    let (ended, mut endings) = mpsc::unbounded_channel::<Settlement>();
    // Attempts spawned whose ending has not been received yet.
    let mut in_flight = 0usize;
    let mut settle: Vec<Settlement> = Vec::new();
    let mut next_prune = engine.now();
    tokio::pin!(stop);
    loop {
        while let Ok(s) = endings.try_recv() {
            settle.push(s);
            in_flight -= 1;
        }
        let free = IN_FLIGHT.saturating_sub(in_flight);
        let claim = (free > 0).then(|| DeliveryClaim {
            token: new_id("lease", engine.now()),
            lease: lease(&engine),
            limit: u32::try_from(free).unwrap_or(u32::MAX),
        });
        let mut full = false;
        if !settle.is_empty() || claim.is_some() {
            let token = claim.as_ref().map(|c| c.token.clone()).unwrap_or_default();
            match engine.write_deliveries(std::mem::take(&mut settle), claim).await {
                Ok(written) => {
                    for (channel, event_seq) in &written.lost {
                        tracing::warn!(
                            channel = %channel,
                            event_seq,
                            "a notification delivery's lease ran out during its attempt; another worker has it"
                        );
                    }
                    full = free > 0 && written.claimed.len() == free;
                    for c in written.claimed {
                        in_flight += 1;
                        let engine = engine.clone();
                        let token = token.clone();
                        let client = clients.get(&engine);
                        let ended = ended.clone();
                        tokio::spawn(async move {
                            let _ = ended.send(attempt(&engine, &client, c, token).await);
                        });
                    }
                }
                // The settlements are not written: each delivery's lease runs out (or is given
                // back at the next start) and it is sent again: at least once, never lost.
                Err(e) => tracing::warn!(
                    error = %e,
                    "cannot write notification settlements and claims; those deliveries are sent again later"
                ),
            }
        }
        if engine.now() >= next_prune {
            next_prune = if prune(&engine).await {
                engine.now()
            } else {
                engine.now() + PRUNE_EVERY
            };
        }
        if full {
            continue;
        }
        let wait = match engine.store().next_delivery_due().await {
            Ok(Some(due)) => (due - engine.now()).to_std().unwrap_or(Duration::ZERO).min(POLL),
            _ => POLL,
        };
        tokio::select! {
            () = &mut stop => break,
            () = engine.outbox_signal().notified() => {}
            Some(s) = endings.recv() => {
                settle.push(s);
                in_flight -= 1;
            }
            () = tokio::time::sleep(wait.max(Duration::from_millis(5))) => {}
        }
    }
    // Stopping: no more claims; what is in flight gets `DRAIN` to end.
    let deadline = tokio::time::Instant::now() + DRAIN;
    while in_flight > 0 {
        tokio::select! {
            Some(s) = endings.recv() => {
                settle.push(s);
                in_flight -= 1;
            }
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    if in_flight > 0 {
        tracing::info!(
            deliveries = in_flight,
            "notification deliveries still being sent at the stop are sent again after it"
        );
    }
    if !settle.is_empty() {
        if let Err(e) = engine.write_deliveries(settle, None).await {
            tracing::warn!(error = %e, "cannot settle the notification deliveries sent before the stop; they are sent again");
        }
    }
}

/// Removes the events kept longer than `[notify] keep_days` with nothing left to send, at most
/// [`PRUNE_BATCHES`] statements of [`PRUNE_BATCH`]; whether more may be left.
async fn prune(engine: &Engine) -> bool {
    let keep = engine.runners().current().notify.keep();
    let before = (engine.now() - keep).timestamp_millis();
    let mut removed = 0u64;
    let mut more = true;
    for _ in 0..PRUNE_BATCHES {
        match engine.store().prune_notifications(before, PRUNE_BATCH).await {
            Ok(n) => {
                removed += n;
                engine.metrics().notification_events_removed(n);
                if n < u64::from(PRUNE_BATCH) {
                    more = false;
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot remove old notification events; the next pass tries again");
                more = false;
                break;
            }
        }
    }
    if removed > 0 {
        tracing::info!(
            events = removed,
            keep_days = keep.num_days(),
            "removed notification events older than the retention, with their deliveries"
        );
    }
    more
}

/// How long a claim's lease lasts: beyond the longest channel timeout.
fn lease(engine: &Engine) -> chrono::TimeDelta {
    let config = engine.runners().current();
    let longest = config
        .notify
        .channels
        .iter()
        .map(|c| c.timeout)
        .max()
        .unwrap_or(Duration::ZERO);
    chrono::TimeDelta::from_std(longest + LEASE_MARGIN).unwrap_or(chrono::TimeDelta::MAX)
}

/// One attempt of one delivery, and how it ended (the worker settles it).
async fn attempt(engine: &Engine, client: &reqwest::Client, c: Claimed, token: String) -> Settlement {
    let config = engine.runners().current();
    let notify = &config.notify;
    let sent = match serde_json::from_str::<Body>(&c.payload) {
        Err(_) => Err(DeliveryError::Unreadable),
        Ok(body) => match notify.channel(&c.channel_id) {
            None => Err(DeliveryError::NotConfigured),
            Some(channel) => match &channel.kind {
                ChannelKind::Webhook(hook) => {
                    let timestamp = engine.now().timestamp();
                    super::webhook::send(
                        client,
                        hook,
                        channel.timeout,
                        &notify.allow,
                        &c.payload,
                        &body,
                        timestamp,
                    )
                    .await
                }
                ChannelKind::Email(mail) => {
                    super::email::send(mail, channel.timeout, &notify.allow, &body).await
                }
            },
        },
    };
    let now = engine.now();
    let metrics = engine.metrics();
    let settle = match &sent {
        Ok(()) => {
            // Milliseconds are what the outbox keeps.
            #[allow(clippy::cast_precision_loss)]
            metrics.notification_delivered((now.timestamp_millis() - c.created_ms) as f64 / 1000.0);
            Settle::Delivered
        }
        Err(e) => {
            let failed = c.attempts.saturating_add(1);
            match notify.schedule().next_delay_ms(failed) {
                Some(delay) => {
                    metrics.notification_failed();
                    let delay = i64::try_from(delay).unwrap_or(i64::MAX);
                    Settle::Retry {
                        due_ms: now.timestamp_millis().saturating_add(delay),
                        error: e.to_string(),
                    }
                }
                None => {
                    metrics.notification_dead();
                    Settle::Dead { error: e.to_string() }
                }
            }
        }
    };
    if let Err(e) = &sent {
        tracing::warn!(
            channel = %c.channel_id,
            event_seq = c.event_seq,
            attempt = c.attempts.saturating_add(1),
            error = %e,
            "notification attempt failed"
        );
    }
    Settlement {
        claimed: c,
        token,
        settle,
        at: now,
    }
}

/// The webhook client, rebuilt when the allowed networks change (a reload).
#[derive(Default)]
struct Clients(std::sync::Mutex<Option<(crate::config::networks::AllowList, reqwest::Client)>>);

impl Clients {
    fn get(&self, engine: &Engine) -> reqwest::Client {
        let allow = engine.runners().current().notify.allow.clone();
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((a, c)) = slot.as_ref() {
            if *a == allow {
                return c.clone();
            }
        }
        let client = super::client(allow.clone());
        *slot = Some((allow, client.clone()));
        client
    }
}
