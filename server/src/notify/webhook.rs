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

use super::{
    address::{check_url, Refused},
    config::{WebhookConfig, WebhookFormat},
    outbox::Body,
    DeliveryError,
};
use base64::{engine::general_purpose::STANDARD, Engine as _};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

/// A webhook signing secret's key bytes.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

const SECRET_PREFIX: &str = "whsec_";

impl Secret {
    /// Parses `whsec_<base64>` (24 to 64 bytes once decoded); the error never holds the value.
    pub fn parse(text: &str) -> Result<Secret, &'static str> {
        let encoded = text
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or("the secret must start with whsec_")?;
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|_| "the secret after whsec_ must be base64")?;
        if !(24..=64).contains(&bytes.len()) {
            return Err("the secret must be 24 to 64 bytes (base64-encoded after whsec_)");
        }
        Ok(Secret(bytes))
    }

    /// The `webhook-signature` value for this message: `v1,<base64 HMAC-SHA256>`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        // HMAC takes a key of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The secret in the variable `name`, as the attempt reads it.
pub(crate) fn secret_from_env(name: &str) -> Result<Secret, &'static str> {
    let value = std::env::var(name).map_err(|_| "the variable is not set")?;
    Secret::parse(&value)
}

/// One attempt: sign and POST `body` (or its Slack text) within `timeout`.
pub(crate) async fn send(
    client: &reqwest::Client,
    hook: &WebhookConfig,
    timeout: Duration,
    allow: &super::address::AllowList,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's own example (secret, id, timestamp, payload and
    /// the signature it gives).
    #[test]
    fn the_signature_is_the_standard_webhooks_one() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_secret_must_be_whsec_and_base64_of_24_to_64_bytes_and_never_shows_itself() {
        assert!(Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(Secret::parse("whsec_!!!").is_err());
        assert!(Secret::parse(&format!("whsec_{}", STANDARD.encode([1u8; 8]))).is_err());
        let s = Secret::parse(&format!("whsec_{}", STANDARD.encode([7u8; 32]))).unwrap();
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
    }
}
