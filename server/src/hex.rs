//! Lower-case hex of bytes: digests shown as ETags, token digests, pseudonyms.

use std::fmt::Write;

/// Two lower-case hex digits per byte.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}
