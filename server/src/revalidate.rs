//! Pages are kept by browsers only with revalidation: every HTML response gets
//! `Cache-Control: no-cache` and a weak ETag of its content, and a request whose
//! `If-None-Match` names the page it would get is answered with a 304 and no body.
//!
//! The ETag is computed with the page's CSP nonce left out: every render carries a new nonce,
//! so a hash over it would never match. A 304 carries no CSP (see [`crate::headers`]): the
//! browser keeps the page it has together with the policy it got with it, so its nonce still
//! matches its scripts.
//!
//! The page is buffered to hash it (pages are tens of kilobytes), so a page is sent once it is
//! rendered whole rather than streamed; the server renders from a local SQLite file in
//! milliseconds, and a compressed page in one piece is what a slow network wants anyway.

use axum::{
    body::{to_bytes, Body},
    extract::Request,
    http::{
        header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY},
        HeaderMap, HeaderValue, Method, StatusCode,
    },
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};

/// The largest page this buffers; a larger one is a bug, answered with 500.
const MAX_PAGE_BYTES: usize = 8 * 1024 * 1024;

/// The middleware: ETag and `no-cache` on pages, 304 when the client's copy is current.
pub async fn html(req: Request, next: Next) -> Response {
    let mut conditional = HeaderMap::new();
    for value in req.headers().get_all(IF_NONE_MATCH) {
        conditional.append(IF_NONE_MATCH, value.clone());
    }
    let method = req.method().clone();
    let response = next.run(req).await;
    let is_page = response.status() == StatusCode::OK
        && matches!(method, Method::GET | Method::HEAD)
        && !response.headers().contains_key(ETAG)
        && response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"));
    if !is_page {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match to_bytes(body, MAX_PAGE_BYTES).await {
        Ok(bytes) => bytes,
        Err(err) => {
            tracing::error!(error = %err, "a page could not be buffered to compute its ETag");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let nonce = parts
        .headers
        .get(CONTENT_SECURITY_POLICY)
        .and_then(crate::headers::nonce_of)
        .unwrap_or_default();
    let etag = etag(&bytes, nonce.as_bytes());
    parts
        .headers
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    parts.headers.insert(ETAG, etag.clone());
    if is_current(&conditional, &etag) {
        let mut headers = HeaderMap::new();
        headers.insert(ETAG, etag);
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if let Some(vary) = parts.headers.get(VARY) {
            headers.insert(VARY, vary.clone());
        }
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// A weak ETag of `page` with every occurrence of `nonce` left out.
fn etag(page: &[u8], nonce: &[u8]) -> HeaderValue {
    let mut hash = Sha256::new();
    let mut rest = page;
    if !nonce.is_empty() {
        while let Some(at) = memchr::memmem::find(rest, nonce) {
            hash.update(&rest[..at]);
            rest = &rest[at + nonce.len()..];
        }
    }
    hash.update(rest);
    let digest = hash.finalize();
    let hex = crate::hex::hex(&digest[..16]);
    HeaderValue::from_str(&format!("W/\"{hex}\"")).unwrap_or(HeaderValue::from_static("W/\"\""))
}

/// Whether the request's `If-None-Match` names `etag`: the client's copy is current. Weak
/// comparison, as RFC 9110 asks for `If-None-Match`.
pub fn is_current(request: &HeaderMap, etag: &HeaderValue) -> bool {
    let ours = etag.to_str().unwrap_or_default().trim_start_matches("W/");
    request.get_all(IF_NONE_MATCH).iter().any(|value| {
        value.to_str().is_ok_and(|list| {
            list.split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.trim_start_matches("W/") == ours)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_that_differ_only_in_their_nonce_have_the_same_etag() {
        let a = etag(
            b"<script nonce=\"AAAA\">x</script><link crossorigin=\"AAAA\">",
            b"AAAA",
        );
        let b = etag(
            b"<script nonce=\"BBBB\">x</script><link crossorigin=\"BBBB\">",
            b"BBBB",
        );
        assert_eq!(a, b);
        assert_ne!(
            a,
            etag(
                b"<script nonce=\"AAAA\">y</script><link crossorigin=\"AAAA\">",
                b"AAAA"
            )
        );
        assert!(a.to_str().unwrap().starts_with("W/\""));
    }

    #[test]
    fn if_none_match_uses_weak_comparison_lists_and_the_wildcard() {
        let ours = HeaderValue::from_static("W/\"abc\"");
        let asks = |value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(IF_NONE_MATCH, HeaderValue::from_static(value));
            is_current(&h, &ours)
        };
        assert!(asks("W/\"abc\""));
        assert!(asks("\"x\", \"abc\""));
        assert!(asks("*"));
        assert!(!asks("W/\"abd\""));
        assert!(!is_current(&HeaderMap::new(), &ours));
    }
}
