//! Webhooks: a JSON POST signed per the Standard Webhooks convention.
//!
//! Headers: `webhook-id` (the event's id: the same on every attempt, the receiver's
//! idempotency key), `webhook-timestamp` (Unix seconds of this attempt) and
//! `webhook-signature`: `v1,` and the base64 of HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the secret's bytes: the secret is
//! written `whsec_` and base64 (24 to 64 bytes once decoded), and read from the variable the
//! channel names when the attempt is made.
//!
//! The client never follows a redirect (a 3xx is a failed attempt, retried with backoff), uses
//! no proxy from the environment, and connects only to addresses [`super::address`] checked.
//! Any answer but a 2xx is a failure; what the receiver said is never kept.

use super::{address::check_url, DeliveryError};
use crate::{
    config::{
        networks::{AllowList, Refused},
        notify::{WebhookConfig, WebhookFormat},
        secret::secret_from_env,
    },
    engine::outbox::Body,
};
use std::time::Duration;

/// One attempt: sign and POST `body` (or its Slack text) within `timeout`.
pub(crate) async fn send(
    client: &reqwest::Client,
    hook: &WebhookConfig,
    timeout: Duration,
    allow: &AllowList,
    stored: &str,
    body: &Body,
    timestamp: i64,
) -> Result<(), DeliveryError> {
    check_url(&hook.url, allow)?;
    let payload: Vec<u8> = match hook.format {
        WebhookFormat::Standard => stored.as_bytes().to_vec(),
        WebhookFormat::Slack => {
            crate::store::to_json(&serde_json::json!({"text": super::message::slack_text(body)})).into_bytes()
        }
    };
    let id = &body.data.id;
    let mut request = client
        .post(hook.url.clone())
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(name) = &hook.secret_env {
        let secret = secret_from_env(name).map_err(DeliveryError::Secret)?;
        request = request.header("webhook-signature", secret.sign(id, timestamp, &payload));
    }
    let answer = request.body(payload).send().await.map_err(|e| from_reqwest(&e))?;
    let status = answer.status();
    // The answer's body is not read: what a receiver says is never kept.
    drop(answer);
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        Err(DeliveryError::Redirected(status.as_u16()))
    } else {
        Err(DeliveryError::Status(status.as_u16()))
    }
}

fn from_reqwest(e: &reqwest::Error) -> DeliveryError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<Refused>() {
            return DeliveryError::Refused(*refused);
        }
        source = s.source();
    }
    if e.is_timeout() {
        DeliveryError::Timeout
    } else if e.is_connect() {
        DeliveryError::Connect
    } else {
        DeliveryError::Transport
    }
}
