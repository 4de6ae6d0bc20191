//! Password hashing: argon2id with OWASP's parameters (19 MiB, two passes, one lane), stored as
//! PHC strings (the parameters travel with each hash, so raising them later needs no
//! migration).
//!
//! Timing: a login for a name nobody has runs the same verification, against a fixed dummy
//! hash made with the same parameters, so the answer's timing does not tell whether the
//! account exists. (`Auth` counts its verifications, so tests can prove both paths do the same
//! work; `benches/login.rs` measures them.)

use argon2::{
    password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Algorithm, Argon2, Params, Version,
};
use std::sync::LazyLock;

/// OWASP Password Storage Cheat Sheet: argon2id, m = 19 MiB, t = 2, p = 1.
pub const MEMORY_KIB: u32 = 19 * 1024;
pub const PASSES: u32 = 2;
pub const LANES: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("[AU1001] the operating system's random number generator failed")]
    Random,
    #[error("[AU1002] hashing failed: {0}")]
    Hash(String),
}

fn hasher() -> Argon2<'static> {
    // The constants are valid parameters; `Params::new` only rejects out-of-range ones.
    let params = Params::new(MEMORY_KIB, PASSES, LANES, None).unwrap_or(Params::DEFAULT);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A PHC string for `password`, with a fresh 16-byte salt from the OS.
pub fn hash(password: &str) -> Result<String, PasswordError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|_| PasswordError::Random)?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| PasswordError::Hash(e.to_string()))?;
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// The hash a login for an unknown name is checked against: same parameters, a password no
/// one can type (random bytes), made once per process.
static DUMMY: LazyLock<String> = LazyLock::new(|| {
    let mut secret = [0u8; 32];
    let _ = getrandom::fill(&mut secret);
    hash(&format!("{secret:?}")).unwrap_or_default()
});

/// Makes the dummy hash now, so the first unknown-name login is not slower than the rest.
pub fn warm_up() {
    LazyLock::force(&DUMMY);
}

/// Whether `password` matches `stored` (a PHC string). With `None` (no such account), the
/// same work runs against the dummy hash and the answer is `false`. Blocking: tens of
/// milliseconds of CPU; call it from `spawn_blocking`.
pub fn verify(password: &str, stored: Option<&str>) -> bool {
    let (phc, real) = match stored {
        Some(s) => (s, true),
        None => (DUMMY.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(phc) else {
        // A stored hash that does not parse matches nothing; still spend the same work.
        if let Ok(dummy) = PasswordHash::new(&DUMMY) {
            let _ = hasher().verify_password(password.as_bytes(), &dummy);
        }
        return false;
    };
    let ok = hasher().verify_password(password.as_bytes(), &parsed).is_ok();
    ok && real
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_carries_owasp_parameters() {
        let h = hash("correct horse battery staple").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(!h.contains("correct horse"));
        assert!(verify("correct horse battery staple", Some(&h)));
        assert!(!verify("correct horse battery stapl", Some(&h)));
        // Two hashes of one password differ (fresh salts).
        assert_ne!(h, hash("correct horse battery staple").unwrap());
    }

    #[test]
    fn an_unknown_account_or_a_broken_hash_never_matches() {
        warm_up();
        assert!(!verify("anything at all", None));
        assert!(!verify("anything at all", Some("not a phc string")));
    }
}
