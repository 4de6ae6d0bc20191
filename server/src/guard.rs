//! The request guard on every state-changing request (POST, PUT, PATCH, DELETE), REST and
//! server functions alike: protection against cross-site request forgery.
//!
//! A web page a user happens to visit can make the browser send a request to a Recourse on
//! `localhost`; without this guard it could create profiles or steer routes. Two rules, each
//! enough on its own against a browser:
//!
//! - **Same origin only.** A browser names the page that caused a request: `Origin` (on every
//!   cross-origin request and on same-origin POSTs) and `Sec-Fetch-Site`. A write whose
//!   `Origin` is not this server's own (`null` included), or whose `Sec-Fetch-Site` is
//!   anything but `same-origin` or `none`, gets 403. Note that another port on `localhost` is
//!   a different origin but the *same site*, so `same-site` is refused too. Clients that are
//!   not browsers (scripts, adapters) send neither header and pass.
//! - **JSON only.** Writes under `/api/` must say `Content-Type: application/json` (415
//!   otherwise): an HTML form can only send form encodings or `text/plain`, and a cross-origin
//!   `fetch` with `application/json` needs a CORS preflight that this server never grants.
//!
//! "This server's own origin" is the authority (`host:port`) the request was sent to, from
//! `Host`; the scheme is not compared, so the check holds behind a TLS-terminating proxy that
//! keeps `Host`.

use axum::{
    body::Body,
    extract::Request,
    http::{header, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
    Json,
};
use policy::api::{ApiError, ApiErrorBody};

/// The guard, as an axum middleware (`axum::middleware::from_fn(guard::writes)`).
pub async fn writes(request: Request<Body>, next: Next) -> Response {
    if is_write(request.method()) {
        if let Err(refused) = check(request.method(), request.uri().path(), request.headers()) {
            return refused.into_response();
        }
    }
    next.run(request).await
}

/// The methods that change state. Others (GET, HEAD, OPTIONS, and anything the router does
/// not know, such as TRACE) pass to the router, which answers 405 for what it does not serve.
fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    ForeignOrigin,
    NotJson,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Refused::ForeignOrigin => (
                StatusCode::FORBIDDEN,
                "foreign_origin",
                "Changes are accepted only from Recourse's own pages or from clients that are not browsers.",
            ),
            Refused::NotJson => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Send the body as JSON, with `Content-Type: application/json`.",
            ),
        };
        let body = ApiError {
            error: ApiErrorBody {
                code: code.to_owned(),
                message: message.to_owned(),
            },
        };
        (status, Json(body)).into_response()
    }
}

fn check(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refused> {
    if let Some(site) = headers.get("sec-fetch-site") {
        if !matches!(site.to_str(), Ok("same-origin" | "none")) {
            return Err(Refused::ForeignOrigin);
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let same = origin
            .to_str()
            .ok()
            .and_then(authority_of)
            .is_some_and(|a| host.is_some_and(|h| a.eq_ignore_ascii_case(h)));
        if !same {
            return Err(Refused::ForeignOrigin);
        }
    }
    // A DELETE carries no body; every other write under /api/ carries JSON.
    if path.starts_with("/api/") && *method != Method::DELETE && !is_json(headers) {
        return Err(Refused::NotJson);
    }
    Ok(())
}

/// `host[:port]` of an origin such as `http://127.0.0.1:3000` (`None` for `null` and anything
/// that is not an origin).
fn authority_of(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    if !matches!(scheme, "http" | "https") || rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    Some(rest)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    const JSON: (&str, &str) = ("content-type", "application/json; charset=utf-8");
    const HOST: (&str, &str) = ("host", "127.0.0.1:3000");

    #[test]
    fn a_script_without_browser_headers_may_write_json() {
        assert_eq!(
            check(&Method::POST, "/api/v1/routes", &headers(&[HOST, JSON])),
            Ok(())
        );
        assert_eq!(
            check(&Method::DELETE, "/api/v1/profiles/p", &headers(&[HOST])),
            Ok(())
        );
    }

    #[test]
    fn the_apps_own_pages_may_write() {
        let h = headers(&[
            HOST,
            JSON,
            ("origin", "http://127.0.0.1:3000"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(check(&Method::POST, "/api/ui/save_profile", &h), Ok(()));
    }

    #[test]
    fn another_origin_is_refused_even_on_the_same_machine() {
        for (origin, site) in [
            ("http://127.0.0.1:8080", "same-site"),
            ("http://evil.example", "cross-site"),
            ("null", "cross-site"),
        ] {
            let h = headers(&[HOST, JSON, ("origin", origin)]);
            assert_eq!(
                check(&Method::POST, "/api/v1/routes", &h),
                Err(Refused::ForeignOrigin),
                "{origin}"
            );
            let h = headers(&[HOST, JSON, ("sec-fetch-site", site)]);
            assert_eq!(
                check(&Method::POST, "/api/v1/routes", &h),
                Err(Refused::ForeignOrigin),
                "{site}"
            );
        }
    }

    #[test]
    fn a_form_or_text_body_is_refused() {
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            let h = headers(&[HOST, ("content-type", ct)]);
            assert_eq!(
                check(&Method::POST, "/api/v1/profiles", &h),
                Err(Refused::NotJson),
                "{ct}"
            );
        }
        assert_eq!(
            check(&Method::PUT, "/api/v1/profiles/p", &headers(&[HOST])),
            Err(Refused::NotJson)
        );
    }

    #[test]
    fn reads_and_unknown_methods_are_not_guarded() {
        assert!(!is_write(&Method::GET));
        assert!(!is_write(&Method::TRACE), "the router answers 405");
        assert!(is_write(&Method::PATCH));
    }
}
