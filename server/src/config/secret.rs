//! A webhook channel's signing secret (Standard Webhooks: `whsec_` and base64), read from the
//! variable the configuration names when it is checked and at each attempt, never kept in the
//! configuration, never printed.

use base64::{engine::general_purpose::STANDARD, Engine as _};
use hmac::{Hmac, Mac};
use sha2::Sha256;

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
