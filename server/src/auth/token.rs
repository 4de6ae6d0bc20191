//! API token secrets: `rct_` followed by 32 random bytes from the operating system, base64url
//! without padding (43 characters). Only their SHA-256 is stored. A token is read from the
//! `Authorization: Bearer` header and nowhere else (on the gateway's routes also from
//! `x-api-key`, the header Anthropic's SDKs and Claude Code send): a token in a query string is
//! never looked at (it would end up in logs, browser history and `Referer` headers).

use axum::http::{header::AUTHORIZATION, HeaderMap};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use sha2::{Digest, Sha256};

/// Every secret starts with this, so a leaked one is recognisable (secret scanners, logs).
pub const PREFIX: &str = "rct_";

/// A new secret.
pub fn generate() -> Result<String, super::password::PasswordError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|_| super::password::PasswordError::Random)?;
    Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// What is stored and looked up: the hex SHA-256 of the secret.
pub fn digest(secret: &str) -> String {
    crate::hex::hex(&Sha256::digest(secret.as_bytes()))
}

/// What the `Authorization` header holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Credentials<'a> {
    /// No `Authorization` header: maybe a session cookie.
    None,
    /// `Bearer rct_...`, of a plausible shape.
    Bearer(&'a str),
    /// Something else (another scheme, a malformed or oversized token): refused, never
    /// silently ignored, so a client learns its credentials are wrong.
    Invalid,
}

pub fn credentials(headers: &HeaderMap) -> Credentials<'_> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Credentials::None;
    };
    let Ok(text) = value.to_str() else {
        return Credentials::Invalid;
    };
    let Some((scheme, token)) = text.split_once(' ') else {
        return Credentials::Invalid;
    };
    if scheme.eq_ignore_ascii_case("bearer") {
        plausible(token.trim())
    } else {
        Credentials::Invalid
    }
}

/// A gateway request's token: `Authorization: Bearer` when it is there (a bad one is refused,
/// never passed over), else `x-api-key`.
pub fn gateway_credentials(headers: &HeaderMap) -> Credentials<'_> {
    match (headers.contains_key(AUTHORIZATION), headers.get("x-api-key")) {
        (false, Some(key)) => key
            .to_str()
            .map_or(Credentials::Invalid, |k: &str| plausible(k.trim())),
        _ => credentials(headers),
    }
}

/// A token of a plausible shape, or `Invalid`.
fn plausible(token: &str) -> Credentials<'_> {
    let plausible = token.starts_with(PREFIX)
        && token.len() <= policy::limits::MAX_TOKEN_CHARS
        && token[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plausible {
        Credentials::Bearer(token)
    } else {
        Credentials::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn secrets_are_prefixed_random_and_stored_only_as_a_digest() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX));
        assert_eq!(a.len(), PREFIX.len() + 43);
        let d = digest(&a);
        assert_eq!(d.len(), 64);
        assert!(!d.contains(&a[PREFIX.len()..]));
    }

    #[test]
    fn only_a_bearer_header_carries_a_token() {
        let mut h = HeaderMap::new();
        assert_eq!(credentials(&h), Credentials::None);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer rct_abc-DEF_123"));
        assert_eq!(credentials(&h), Credentials::Bearer("rct_abc-DEF_123"));
        for bad in [
            "Basic YWRhOnB3",
            "Bearer",
            "Bearer xyz",
            "Bearer rct_a b",
            "Token rct_abc",
        ] {
            h.insert(AUTHORIZATION, HeaderValue::from_static(bad));
            assert_eq!(credentials(&h), Credentials::Invalid, "{bad}");
        }
    }

    #[test]
    fn the_gateway_also_reads_x_api_key_but_never_over_a_bad_authorization() {
        let mut h = HeaderMap::new();
        assert_eq!(gateway_credentials(&h), Credentials::None);
        h.insert("x-api-key", HeaderValue::from_static("rct_abc"));
        assert_eq!(gateway_credentials(&h), Credentials::Bearer("rct_abc"));
        assert_eq!(credentials(&h), Credentials::None, "only the gateway reads it");
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic x"));
        assert_eq!(gateway_credentials(&h), Credentials::Invalid);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer rct_other"));
        assert_eq!(gateway_credentials(&h), Credentials::Bearer("rct_other"));
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("sk-ant-not-ours"));
        assert_eq!(gateway_credentials(&h), Credentials::Invalid);
    }
}
