//! Security headers on every response.
//!
//! - `Content-Security-Policy` ([`policy`]): scripts, styles, images, fonts and connections
//!   only from this origin (`default-src 'self'`, which every fetch directive the policy does
//!   not name falls back to; it names only those it sets otherwise, since it is sent with every
//!   response, each WASM piece of a page included); no plugins, no `<base>`, forms post only
//!   here, and no framing (`frame-ancestors 'none'`, with `X-Frame-Options: DENY` for browsers
//!   that predate it).
//!   Inline scripts run only with the page's nonce: `leptos_axum` makes a fresh one for every
//!   page it renders and puts it on the hydration script and the streaming scripts;
//!   [`with_page_csp`] puts the same nonce into that page's policy. `'wasm-unsafe-eval'` lets
//!   the page compile its own WASM (it allows nothing else). Responses that are not pages get the
//!   policy without a nonce, except the files of the UI's build (below).
//! - The files of the UI's build (`/pkg/<build>/…`: the script, the WASM and its pieces, the
//!   stylesheet) get [`RESOURCE_POLICY`], which allows nothing: they are loaded by a page, whose
//!   own policy governs them (a browser applies a script's, a stylesheet's or a WASM file's own
//!   policy to nothing), and opened by themselves they are shown as text or downloaded. It is
//!   the strictest policy and the shortest, which counts: a page's first visit fetches dozens
//!   of pieces, each with its headers.
//! - `X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin`.
//! - `Strict-Transport-Security` when the request came over TLS. Recourse does not terminate
//!   TLS itself, so that is what a TLS-terminating proxy says (`X-Forwarded-Proto: https` or
//!   `Forwarded: proto=https`). Browsers ignore HSTS received over plain HTTP, so a client that
//!   forges the header gains nothing.
//!
//! - `Cache-Control: no-store` on every response under `/api/` that sets no `Cache-Control`
//!   of its own: authenticated JSON, and a new token's secret, stay out of every cache. Pages
//!   keep `no-cache` with their ETag ([`crate::revalidate`]) and assets `immutable`.
//!
//! A 304 gets no CSP: the browser keeps the policy it stored with the page, whose nonce matches
//! the page it keeps (see [`crate::revalidate`]); a new nonce would block that page's scripts.

use axum::{
    extract::Request,
    http::{
        header::{
            CACHE_CONTROL, CONTENT_SECURITY_POLICY, FORWARDED, REFERRER_POLICY, STRICT_TRANSPORT_SECURITY,
            X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
        },
        HeaderMap, HeaderValue, StatusCode,
    },
    middleware::Next,
    response::Response,
};
use leptos::prelude::use_context;

/// The Content-Security-Policy; `nonce` is the page's, for its inline scripts.
pub fn policy(nonce: Option<&str>) -> String {
    let scripts = match nonce {
        Some(nonce) => format!("'self' 'nonce-{nonce}' 'wasm-unsafe-eval'"),
        None => "'self' 'wasm-unsafe-eval'".to_string(),
    };
    format!(
        "default-src 'self'; script-src {scripts}; object-src 'none'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

/// The policy of a file of the UI's build (see the module's documentation): nothing may load
/// or run from it, and nothing may frame it.
pub const RESOURCE_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// The nonce in a policy made by [`policy`], if it has one.
pub fn nonce_of(policy: &HeaderValue) -> Option<&str> {
    let text = policy.to_str().ok()?;
    let start = text.find("'nonce-")? + "'nonce-".len();
    let len = text[start..].find('\'')?;
    Some(&text[start..start + len]).filter(|n| !n.is_empty())
}

/// Wraps a page's Leptos context so the page's response carries the policy with the nonce that
/// `leptos_axum` provided for the page (it provides its contexts before this one runs).
pub fn with_page_csp<F>(context: F) -> impl Fn() + Clone + Send + Sync + 'static
where
    F: Fn() + Clone + Send + Sync + 'static,
{
    move || {
        context();
        let nonce = leptos::nonce::use_nonce();
        let response = use_context::<leptos_axum::ResponseOptions>();
        if let (Some(nonce), Some(response)) = (nonce, response) {
            if let Ok(value) = HeaderValue::from_str(&policy(Some(&nonce))) {
                response.insert_header(CONTENT_SECURITY_POLICY, value);
            }
        }
    }
}

/// Whether the request reached the server over TLS, as a TLS-terminating proxy reports it.
pub fn over_tls(request: &HeaderMap) -> bool {
    let forwarded_proto = request
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let forwarded = request.get_all(FORWARDED).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split([';', ','])
                .filter_map(|pair| pair.trim().split_once('='))
                .any(|(k, v)| {
                    k.eq_ignore_ascii_case("proto") && v.trim_matches('"').eq_ignore_ascii_case("https")
                })
        })
    });
    forwarded_proto || forwarded
}

/// Adds the security headers to a response's headers (a CSP only if it has none yet).
pub fn secure(headers: &mut HeaderMap, over_tls: bool) {
    if !headers.contains_key(CONTENT_SECURITY_POLICY) {
        if let Ok(value) = HeaderValue::from_str(&policy(None)) {
            headers.insert(CONTENT_SECURITY_POLICY, value);
        }
    }
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if over_tls {
        headers.insert(
            STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
}

/// The middleware that puts the security headers on every response.
pub async fn security(req: Request, next: Next) -> Response {
    let tls = over_tls(req.headers());
    let api = req.uri().path().starts_with("/api/");
    let mut response = next.run(req).await;
    secure(response.headers_mut(), tls);
    if api && !response.headers().contains_key(CACHE_CONTROL) {
        response
            .headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if response.status() == StatusCode::NOT_MODIFIED {
        response.headers_mut().remove(CONTENT_SECURITY_POLICY);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_only_this_origin_and_forbids_framing() {
        let p = policy(None);
        assert!(p.contains("script-src 'self' 'wasm-unsafe-eval';"), "{p}");
        assert!(p.contains("frame-ancestors 'none'"), "{p}");
        assert!(!p.contains("unsafe-inline"), "{p}");
        assert!(!p.contains("nonce"), "{p}");
        // Styles, images, fonts and connections: `default-src`, which they fall back to.
        assert!(p.starts_with("default-src 'self';"), "{p}");
        for fallback in [
            "style-src",
            "img-src",
            "font-src",
            "connect-src",
            "media-src",
            "worker-src",
        ] {
            assert!(!p.contains(fallback), "{p}");
        }
    }

    #[test]
    fn a_page_policy_carries_its_nonce_and_the_nonce_can_be_read_back() {
        let p = HeaderValue::from_str(&policy(Some("abc-_123"))).unwrap();
        assert!(p
            .to_str()
            .unwrap()
            .contains("script-src 'self' 'nonce-abc-_123' 'wasm-unsafe-eval'"));
        assert_eq!(nonce_of(&p), Some("abc-_123"));
        assert_eq!(nonce_of(&HeaderValue::from_str(&policy(None)).unwrap()), None);
    }

    #[test]
    fn tls_is_what_the_proxy_reports() {
        let with = |k: &'static str, v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(k, HeaderValue::from_static(v));
            over_tls(&h)
        };
        assert!(with("x-forwarded-proto", "https"));
        assert!(with("x-forwarded-proto", "HTTPS, http"));
        assert!(with("forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43"));
        assert!(with("forwarded", "for=\"[2001:db8::1]\";proto=\"https\""));
        assert!(!with("x-forwarded-proto", "http"));
        assert!(!with("forwarded", "for=192.0.2.60;proto=http"));
        assert!(!over_tls(&HeaderMap::new()));
    }

    #[test]
    fn hsts_only_over_tls_and_an_existing_policy_is_kept() {
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'"),
        );
        secure(&mut h, false);
        assert_eq!(h[CONTENT_SECURITY_POLICY], "default-src 'none'");
        assert_eq!(h[X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[REFERRER_POLICY], "same-origin");
        assert!(!h.contains_key(STRICT_TRANSPORT_SECURITY));
        secure(&mut h, true);
        assert_eq!(h[STRICT_TRANSPORT_SECURITY], "max-age=31536000");
    }
}
