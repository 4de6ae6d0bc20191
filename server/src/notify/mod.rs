//! Notifications: people are told when a route needs them, when it switched candidates, when
//! it waits a long time, when a provider is down or back, and when it finished.
//!
//! How a value travels:
//! 1. A route transition commits in the engine's writer; in the same transaction
//!    [`outbox::queue`] (the one call, from `engine/transact.rs`) asks `policy::notify` what the
//!    transition is worth telling and to which channels the profile's rules send it, and queues
//!    one event row (the body every channel builds on; in the in-app list when a rule says so)
//!    and one delivery row per configured channel.
//! 2. After the commit the engine wakes the [`worker`], which leases due deliveries (the head
//!    of each route's queue per channel), sends each through its channel ([`webhook`],
//!    [`email`]) with the address checks of [`address`], and settles it: delivered, again
//!    later with backoff, or dead after the last attempt.
//! 3. The UI reads the in-app list and each person's read position through [`list`] and
//!    [`mark_read`], and operators the deliveries (dead ones above all) through [`deliveries`];
//!    `/metrics` counts them.
//!
//! Channels and delivery settings are the operator's ([`config`], part of the configuration
//! file, reloaded on SIGHUP); rules are a profile's (`policy::notify::NotificationRule`,
//! edited with the profile).
//!
//! Guarantees: an event exists exactly when its transition committed; each delivery is made
//! at least once (a crash between a receiver's answer and its settlement sends it again, with
//! the same `webhook-id`, which is what receivers deduplicate on); two live replicas never
//! send the same delivery; a route's events reach a channel in the order they happened; a
//! receiver that fails, hangs or redirects is retried with backoff and holds up nothing else.

pub mod address;
pub mod email;
pub mod message;
pub mod webhook;
pub mod worker;

use crate::engine::{Engine, EngineError};
use policy::{
    limits::{DEFAULT_NOTIFICATION_PAGE, MAX_NOTIFICATION_PAGE},
    notify::{ChannelOption, DeliveryStatus, DeliveryView, NotificationPage, IN_APP_CHANNEL},
};

/// Why one attempt failed, in words safe to store and show (never what a receiver answered,
/// never an address or a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    #[error("the receiver answered {0}")]
    Status(u16),
    #[error("the receiver redirected ({0}); redirects are not followed")]
    Redirected(u16),
    #[error("no answer within the channel's timeout")]
    Timeout,
    #[error("could not connect to the receiver")]
    Connect,
    #[error("the connection failed")]
    Transport,
    #[error("{0}")]
    Refused(#[from] crate::config::networks::Refused),
    #[error("the channel's secret is not usable: {0}")]
    Secret(&'static str),
    #[error("the mail server refused the message")]
    MailRefused,
    #[error("the TLS handshake or the certificate check failed")]
    Tls,
    #[error("the channel is no longer in the server's configuration")]
    NotConfigured,
    #[error("the stored event could not be read")]
    Unreadable,
}

/// The HTTP client webhooks are sent with: no redirects, no proxy, no retries of its own,
/// HTTP/1.1, and a resolver that hands it only addresses `allow` accepts.
pub(crate) fn client(allow: crate::config::networks::AllowList) -> reqwest::Client {
    // Err: a provider is installed already; it serves as well.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .retry(reqwest::retry::never())
        .user_agent(concat!("Recourse/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(address::CheckedResolver::shared(allow))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Whose list, as far as notifications care: the person, and the profiles a scoped token
/// reaches (`None`: every profile).
pub struct Reader<'a> {
    pub account_id: &'a str,
    pub within: Option<&'a [String]>,
}

/// The in-app list for `reader`: newest first, before `before` (a `seq`) when given, at most
/// `limit` ([`DEFAULT_NOTIFICATION_PAGE`] by default, at most [`MAX_NOTIFICATION_PAGE`]), and how
/// many are unread.
pub async fn list(
    engine: &Engine,
    reader: &Reader<'_>,
    before: Option<i64>,
    limit: Option<u32>,
) -> Result<NotificationPage, EngineError> {
    let limit = limit
        .unwrap_or(DEFAULT_NOTIFICATION_PAGE)
        .clamp(1, MAX_NOTIFICATION_PAGE);
    let store = engine.store();
    let items = store
        .notifications(reader.account_id, reader.within, before, limit, |payload| {
            serde_json::from_str::<crate::engine::outbox::Body>(payload).map_or_else(
                |_| "(unreadable notification)".to_owned(),
                |b| message::summary(&b),
            )
        })
        .await?;
    let unread = store
        .unread_notifications(reader.account_id, reader.within)
        .await?;
    Ok(NotificationPage { items, unread })
}

/// Marks the person's list read up to `through_seq`; how many stay unread.
pub async fn mark_read(engine: &Engine, reader: &Reader<'_>, through_seq: u64) -> Result<u64, EngineError> {
    let store = engine.store();
    store
        .mark_notifications_read(reader.account_id, through_seq)
        .await?;
    Ok(store
        .unread_notifications(reader.account_id, reader.within)
        .await?)
}

/// Deliveries to configured channels, by status (all when `None`), newest first.
pub async fn deliveries(
    engine: &Engine,
    reader: &Reader<'_>,
    status: Option<DeliveryStatus>,
    before: Option<i64>,
    limit: Option<u32>,
) -> Result<Vec<DeliveryView>, EngineError> {
    let limit = limit
        .unwrap_or(DEFAULT_NOTIFICATION_PAGE)
        .clamp(1, MAX_NOTIFICATION_PAGE);
    Ok(engine
        .store()
        .deliveries(status, reader.within, before, limit)
        .await?)
}

/// The channels a rule may name now: the in-app list, then the configuration's, in its order.
pub fn channels(engine: &Engine) -> Vec<ChannelOption> {
    let config = engine.runners().current();
    let mut out = vec![ChannelOption {
        id: IN_APP_CHANNEL.to_owned(),
        kind: IN_APP_CHANNEL.to_owned(),
        label: Some("Recourse's notification list (and the browser's notifications)".to_owned()),
    }];
    out.extend(config.notify.channels.iter().map(|c| ChannelOption {
        id: c.id.clone(),
        kind: c.kind.as_str().to_owned(),
        label: c.label.clone(),
    }));
    out
}
