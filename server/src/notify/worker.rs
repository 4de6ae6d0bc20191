//! The delivery worker: takes due deliveries from the outbox with a lease, sends each through
//! its channel in a task of its own, and settles it: delivered, tried again later (exponential
//! backoff with a cap, `policy::notify::DeliverySchedule`), or dead after the last attempt.
//!
//! - Woken by the engine after every commit that queued an event ([`crate::engine::Engine`]'s
//!   outbox signal), and at least every [`POLL`] (other replicas' events, due retries).
//! - At most [`IN_FLIGHT`] attempts at once; each bounded by its channel's timeout, so a
//!   receiver that hangs holds one slot for that long and never the others: other channels
//!   and other routes go on.
//! - A route's events reach each channel in order: only the head of a (channel, route) queue is
//!   ever claimed (`store/notify.rs`).
//! - The lease outlasts the longest attempt ([`LEASE_MARGIN`] beyond the longest channel
//!   timeout), so a live worker never loses a delivery it is sending; a replica that dies
//!   mid-delivery leaves a lease that runs out, and another replica sends it again with the
//!   same `webhook-id`. On SQLite (one serving process) the next start gives every lease back.
//! - Nothing here touches the writer: claims and settlements are short statements of their
//!   own, so a transition never waits for a delivery.

use super::{config::ChannelKind, outbox::Body, DeliveryError};
use crate::{
    engine::Engine,
    store::{
        new_id,
        notify::{Claimed, Settle},
        Dialect,
    },
};
use std::{future::Future, sync::Arc, time::Duration};
use tokio::sync::Semaphore;

/// Longest the worker sleeps without looking at the outbox.
pub const POLL: Duration = Duration::from_secs(1);
/// Most attempts in flight at once.
pub const IN_FLIGHT: usize = 32;
/// How much longer than the longest channel timeout a lease lasts.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// Runs the worker until `stop` resolves (attempts in flight finish or time out on their own).
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
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let clients = Clients::default();
    tokio::pin!(stop);
    loop {
        let free = u32::try_from(slots.available_permits()).unwrap_or(0);
        let mut claimed_any = false;
        if free > 0 {
            match claim(&engine, free).await {
                Ok((token, claimed)) => {
                    claimed_any = claimed.len() as u32 == free;
                    for c in claimed {
                        let Ok(permit) = slots.clone().acquire_owned().await else {
                            return;
                        };
                        let engine = engine.clone();
                        let token = token.clone();
                        let client = clients.get(&engine);
                        tokio::spawn(async move {
                            attempt(&engine, &client, &c, &token).await;
                            drop(permit);
                            // Its successor on the same route may be due now.
                            engine.outbox_signal().notify_one();
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot claim notification deliveries; trying again"),
            }
        }
        if claimed_any {
            continue;
        }
        let wait = match engine.store().next_delivery_due().await {
            Ok(Some(due)) => (due - engine.now()).to_std().unwrap_or(Duration::ZERO).min(POLL),
            _ => POLL,
        };
        tokio::select! {
            () = &mut stop => return,
            () = engine.outbox_signal().notified() => {}
            () = tokio::time::sleep(wait.max(Duration::from_millis(5))) => {}
        }
    }
}

/// Leases due deliveries for a fresh token.
async fn claim(engine: &Engine, limit: u32) -> Result<(String, Vec<Claimed>), crate::store::StoreError> {
    let now = engine.now();
    let config = engine.runners().current();
    let longest = config
        .notify
        .channels
        .iter()
        .map(|c| c.timeout)
        .max()
        .unwrap_or(Duration::ZERO);
    let lease = chrono::TimeDelta::from_std(longest + LEASE_MARGIN).unwrap_or(chrono::TimeDelta::MAX);
    let token = new_id("lease", now);
    // SQLite: one writer at a time in this process (the engine's writer takes the same lock).
    let _writer = if engine.store().dialect() == Dialect::Sqlite {
        Some(engine.writer().await)
    } else {
        None
    };
    let claimed = engine
        .store()
        .claim_deliveries(&token, now, policy::time::after(now, lease), limit)
        .await?;
    Ok((token, claimed))
}

/// One attempt of one delivery, then its settlement.
async fn attempt(engine: &Engine, client: &reqwest::Client, c: &Claimed, token: &str) {
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
    let _writer = if engine.store().dialect() == Dialect::Sqlite {
        Some(engine.writer().await)
    } else {
        None
    };
    match engine.store().settle_delivery(c, token, &settle, now).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            channel = %c.channel_id,
            event_seq = c.event_seq,
            "a notification delivery's lease ran out during its attempt; another worker has it"
        ),
        // The lease runs out and the delivery is claimed again: at least once, never lost.
        Err(e) => tracing::warn!(error = %e, "cannot settle a notification delivery; it will be tried again"),
    }
}

/// The webhook client, rebuilt when the allowed networks change (a reload).
#[derive(Default)]
struct Clients(std::sync::Mutex<Option<(super::address::AllowList, reqwest::Client)>>);

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
