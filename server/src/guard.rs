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
//!
//! That makes `Host` itself matter: a page on `rebind.attacker.example` whose name the attacker
//! re-points at 127.0.0.1 (DNS rebinding) is same-origin to those rules. So [`hosts`], on every
//! request and before any session or demo sign-in, answers only the names this server is for
//! (`AuthSettings::allowed_hosts`): on a loopback address, `localhost`, `*.localhost`,
//! 127.0.0.0/8 and `[::1]` (any port) plus each `--allowed-host`; others get 421.

use crate::state::AppState;
use axum::{
    body::Body,
    extract::{Request, State},
    http::{header, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::MethodRouter,
    Json,
};
use policy::api::{ApiError, ApiErrorBody};

/// The same-origin rule, as an axum middleware on every request
/// (`axum::middleware::from_fn(guard::writes)`).
pub async fn writes(request: Request<Body>, next: Next) -> Response {
    if is_write(request.method()) {
        if let Err(refused) = check_origin(request.headers()) {
            return refused.into_response();
        }
        // Leptos routes the registered server functions itself, ahead of the `/api/{*fn_name}`
        // route that carries [`json_only`], so their JSON-only rule is here. (The UI's server
        // functions are all `input = Json`: the browser posts `application/json`.)
        let path = request.uri().path();
        if path.starts_with(SERVER_FNS) {
            if let Err(refused) = check_json(request.method(), path, request.headers()) {
                return refused.into_response();
            }
        }
    }
    next.run(request).await
}

/// Where the UI's server functions live.
const SERVER_FNS: &str = "/api/ui/";

/// The `Host` rule (DNS rebinding), as an axum middleware on every request
/// (`axum::middleware::from_fn_with_state(state, guard::hosts)`), outside the session layer.
pub async fn hosts(State(state): State<AppState>, request: Request<Body>, next: Next) -> Response {
    if let Some(allowed) = &state.auth.settings().allowed_hosts {
        let host = request
            .headers()
            .get(header::HOST)
            // Not text: refused below, as an empty name.
            .map(|h| h.to_str().unwrap_or_default())
            .or_else(|| request.uri().authority().map(|a| a.as_str()));
        // A request without any host is no browser's (browsers always send one): not a
        // rebinding page.
        if host.is_some_and(|h| !host_allowed(h, allowed)) {
            // 421 Misdirected Request, not 403: the request is not refused for who sent it
            // but because this server is not the one for that name, and a client (or a proxy
            // configured with the wrong name) may retry elsewhere. The body never echoes the
            // name.
            return (
                StatusCode::MISDIRECTED_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "This server does not answer for this host name.\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// Whether `host` (a `Host` header: `name[:port]`, `[v6][:port]`) is a loopback name or
/// address, or one of `allowed` (`name` for any port, or `name:port`).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let Some((name, port)) = split_host(host) else {
        return false;
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let loopback = if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok_and(|a| a.is_loopback())
    } else if let Ok(v4) = name.parse::<std::net::Ipv4Addr>() {
        v4.is_loopback()
    } else {
        let lower = name.to_ascii_lowercase();
        lower == "localhost" || lower.ends_with(".localhost")
    };
    loopback
        || allowed.iter().any(|a| {
            let a = a.trim();
            a.eq_ignore_ascii_case(name) || a.eq_ignore_ascii_case(host)
        })
}

/// `name` and the port text after `:` (IPv6 literals keep their brackets).
fn split_host(host: &str) -> Option<(&str, Option<&str>)> {
    if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        return match rest {
            "" => Some((name, None)),
            _ => Some((name, Some(rest.strip_prefix(':')?))),
        };
    }
    match host.split_once(':') {
        None => Some((host, None)),
        Some((_, port)) if port.contains(':') => None,
        Some((name, port)) => Some((name, Some(port))),
    }
}

/// The JSON-only rule on one route's methods under `/api/` (`.route(path, json_only(post(h)))`):
/// it runs once the path and the method matched, so a method the path does not serve still
/// gets the router's 405 (a `Router`-wide layer would answer it 415 first).
pub fn json_only<S: Clone + Send + Sync + 'static>(methods: MethodRouter<S>) -> MethodRouter<S> {
    methods.route_layer(axum::middleware::from_fn(json_writes))
}

async fn json_writes(request: Request<Body>, next: Next) -> Response {
    if is_write(request.method()) {
        if let Err(refused) = check_json(request.method(), request.uri().path(), request.headers()) {
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

#[cfg(test)]
fn check(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refused> {
    check_origin(headers)?;
    check_json(method, path, headers)
}

fn check_origin(headers: &HeaderMap) -> Result<(), Refused> {
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
    Ok(())
}

fn check_json(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refused> {
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

pub(crate) fn is_json(headers: &HeaderMap) -> bool {
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
    fn loopback_names_and_allowed_hosts_pass_and_rebinding_names_do_not() {
        let none: &[String] = &[];
        for ok in [
            "localhost",
            "localhost:3000",
            "LocalHost.:3000",
            "app.localhost:8080",
            "127.0.0.1",
            "127.0.0.1:3000",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:3000",
        ] {
            assert!(host_allowed(ok, none), "{ok}");
        }
        for refused in [
            "rebind.attacker.example",
            "rebind.attacker.example:3000",
            "localhost.attacker.example",
            "127.0.0.1.attacker.example",
            "localhostx",
            "10.0.0.1:3000",
            "[::2]:3000",
            "[::1]x",
            "localhost:",
            "localhost:3000:1",
            "localhost:abc",
            "user@localhost",
            "",
        ] {
            assert!(!host_allowed(refused, none), "{refused}");
        }
        let allowed = ["recourse.internal".to_owned(), "b.example:8443".to_owned()];
        assert!(host_allowed("recourse.internal", &allowed));
        assert!(host_allowed("RECOURSE.internal:9000", &allowed));
        assert!(host_allowed("b.example:8443", &allowed));
        assert!(!host_allowed("b.example:8444", &allowed));
        assert!(!host_allowed("evil.internal", &allowed));
    }

    #[test]
    fn reads_and_unknown_methods_are_not_guarded() {
        assert!(!is_write(&Method::GET));
        assert!(!is_write(&Method::TRACE), "the router answers 405");
        assert!(is_write(&Method::PATCH));
    }
}
