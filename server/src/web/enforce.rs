//! The HTTP edge of authentication: the session layer, the ONE enforcement layer that applies
//! [`crate::auth::rules`] to every routed request (and to the fallback), the `Secure` flag over TLS,
//! and the login page's form endpoints (`POST /login`, `POST /logout`), which work without
//! the page's script.

use crate::auth::{
    rules::{self, Access, Surface},
    session::{self, COOKIE},
    Actor, Auth, AuthError, Principal,
};
use crate::{state::AppState, store::Sessions};
use axum::{
    extract::{ConnectInfo, MatchedPath, Request, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
    routing::post,
    Extension, Form, Router,
};
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use tower_sessions::{cookie::SameSite, Expiry, Session, SessionManagerLayer};

/// Sessions on the store's pool: cookie `recourse_session`, HttpOnly, SameSite=Lax, path `/`;
/// the row expires after 8 h without a write (the injected clock decides expiry first, see
/// [`crate::auth::session`]). `Secure` is added per response by [`secure_cookie`].
pub fn session_layer(auth: &Auth) -> SessionManagerLayer<Sessions> {
    SessionManagerLayer::new(auth.store().session_store())
        .with_name(COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(false)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::seconds(session::IDLE.num_seconds()),
        ))
}

/// Marks the session cookie `Secure` when the request came over TLS (as a TLS-terminating
/// proxy reports it: `X-Forwarded-Proto: https` or `Forwarded: proto=https`). A client that
/// forges the header over plain HTTP only stops its own browser from keeping the cookie.
pub async fn secure_cookie(request: Request, next: Next) -> Response {
    let tls = crate::headers::over_tls(request.headers());
    let mut response = next.run(request).await;
    if tls {
        let cookies: Vec<HeaderValue> = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .cloned()
            .collect();
        let headers = response.headers_mut();
        headers.remove(header::SET_COOKIE);
        for value in cookies {
            let fixed = value
                .to_str()
                .ok()
                .filter(|v| v.starts_with(&format!("{COOKIE}=")) && !v.contains("; Secure"))
                .and_then(|v| HeaderValue::from_str(&format!("{v}; Secure")).ok())
                .unwrap_or(value);
            headers.append(header::SET_COOKIE, fixed);
        }
    }
    response
}

/// The client's address: the peer, or, when the peer is a trusted proxy, the last address its
/// `X-Forwarded-For` names.
pub fn client_address(headers: &HeaderMap, peer: Option<IpAddr>, trusted: &[IpAddr]) -> Option<String> {
    let peer = peer?;
    if trusted.contains(&peer) {
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|a| a.trim().parse::<IpAddr>().ok())
            .next_back();
        if let Some(client) = forwarded {
            return Some(client.to_string());
        }
    }
    Some(peer.to_string())
}

fn peer(request: &Request) -> Option<IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Why the rules layer answers a request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unrouted {
    /// A listed route asked with a method it does not serve (OPTIONS, TRACE): 405, as the
    /// router would say, with nothing run.
    MethodNotAllowed,
    /// A route nobody listed in the rules: refused (403) and logged.
    Unlisted,
}

impl Unrouted {
    fn respond(self, method: &str, what: &str) -> Response {
        match self {
            Unrouted::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED.into_response(),
            Unrouted::Unlisted => {
                tracing::error!(
                    method,
                    route = what,
                    "a route without an entry in auth::rules was refused"
                );
                AuthError::Forbidden(
                    "This endpoint has no access rule; it is refused until it gets one.".to_owned(),
                )
                .into_response()
            }
        }
    }
}

/// What the rules say about this request: its surface and access, or why there is none.
fn target(template: Option<&str>, path: &str, method: &str) -> Result<(Surface, Access), Unrouted> {
    let Some(template) = template else {
        // The fallback (an unknown path): nothing to show to nobody.
        let surface = if path.starts_with("/api/") {
            Surface::Api
        } else {
            Surface::Page
        };
        return Ok((surface, Access::Authenticated));
    };
    // Server functions are routed twice: under their own paths (Leptos's routes) and under
    // the catch-all `/api/{*fn_name}`; either way the function's name decides.
    if let Some(name) = rules::registered_server_fn(path) {
        return rules::server_fn(name)
            .map(|access| (Surface::ServerFn, access))
            .ok_or(Unrouted::Unlisted);
    }
    if template == rules::SERVER_FN_ROUTE {
        // Not a server function: the handler answers that; only principals learn it.
        return Ok((Surface::Api, Access::Authenticated));
    }
    rules::route(method, template).ok_or_else(|| {
        if rules::ROUTES.iter().any(|(_, t, _, _)| *t == template) {
            Unrouted::MethodNotAllowed
        } else {
            Unrouted::Unlisted
        }
    })
}

/// A refusal as the surface shows it: pages and forms go to the login page when nobody is
/// signed in, and a page someone signed in may not see says so in HTML (what it needs, and a
/// way to sign in as someone else); the gateway answers in its style's shape; everything else
/// answers JSON.
fn refuse(surface: Surface, error: AuthError, path_and_query: &str, headers: &HeaderMap) -> Response {
    if surface == Surface::Gateway {
        let path = path_and_query.split('?').next().unwrap_or_default();
        return crate::gateway::refusal(path, headers, error);
    }
    match (surface, &error) {
        (Surface::Page, AuthError::Unauthenticated { .. }) => {
            Redirect::to(&format!("/login?next={}", encode(path_and_query))).into_response()
        }
        (Surface::Page, AuthError::Forbidden(message)) => (
            StatusCode::FORBIDDEN,
            axum::response::Html(forbidden_page(message)),
        )
            .into_response(),
        (Surface::Form, AuthError::Unauthenticated { .. }) => Redirect::to("/login").into_response(),
        _ => error.into_response(),
    }
}

/// The page a signed-in person gets for a page their account may not see (no script, no
/// styles: it works under the page CSP as it is).
fn forbidden_page(message: &str) -> String {
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Not for this account</title></head><body><main>\
         <h1>Not for this account</h1><p>{escaped}</p>\
         <form method=\"post\" action=\"/logout\"><button type=\"submit\">Sign in as someone else</button></form>\
         </main></body></html>"
    )
}

/// Percent-encodes a path for a query parameter (everything but unreserved characters and `/`).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The one enforcement point: resolve the principal, look the route up in the rules, let it
/// through or refuse it. Applied with `route_layer` to every route, and around the fallback.
pub async fn enforce(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let auth = state.auth.clone();
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_owned());
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let (surface, access) = match target(template.as_deref(), &path, &method) {
        Ok(t) => t,
        Err(why) => return why.respond(&method, template.as_deref().unwrap_or(&path)),
    };
    let session = request.extensions().get::<Session>().cloned();
    let address = client_address(
        request.headers(),
        peer(&request),
        &auth.settings().trusted_proxies,
    );
    let resolved = if surface == Surface::Gateway {
        auth.resolve_key(request.headers()).await
    } else {
        auth.resolve(request.headers(), session.as_ref()).await
    };
    let principal = match resolved {
        Ok(p) => p,
        // Bad credentials do not close public routes (`/healthz`, the login page).
        Err(AuthError::Unauthenticated { .. }) if access == Access::Public => None,
        Err(e) => return refuse(surface, e, &path_and_query, request.headers()),
    };
    let principal = match (principal, surface, &session) {
        (None, Surface::Page, Some(session)) if auth.settings().demo && access != Access::Public => {
            match demo_sign_in(&auth, session, address.clone()).await {
                Ok(p) => p,
                Err(e) => return e.into_response(),
            }
        }
        (p, _, _) => p,
    };
    if let Err(e) = access.check(principal.as_ref()) {
        return refuse(surface, e, &path_and_query, request.headers());
    }
    if principal.as_ref().is_some_and(|p| p.profile_ids.is_some())
        && matches!(surface, Surface::Page | Surface::ServerFn)
    {
        return AuthError::Forbidden(
            "A token scoped to profiles reaches only the REST API, where each profile is checked.".to_owned(),
        )
        .into_response();
    }
    if matches!(surface, Surface::Page | Surface::ServerFn) {
        let accounts_exist = match auth.accounts_exist().await {
            Ok(e) => e,
            Err(e) => return e.into_response(),
        };
        request.extensions_mut().insert(app::auth::SessionView {
            viewer: principal.as_ref().map(Principal::who_am_i),
            accounts_exist,
            demo: auth.settings().demo,
        });
    }
    request
        .extensions_mut()
        .insert(Actor::of(principal.as_ref(), address));
    if let Some(p) = principal {
        request.extensions_mut().insert(p);
    }
    next.run(request).await
}

/// `serve --demo`: a page visitor without a session is signed into the demo account.
async fn demo_sign_in(
    auth: &Auth,
    session: &Session,
    address: Option<String>,
) -> Result<Option<Principal>, AuthError> {
    let Some(account) = auth.demo_account().await? else {
        return Ok(None);
    };
    auth.start_session(session, &account).await?;
    let principal = auth.session_principal(account).await?;
    let actor = Actor::of(Some(&principal), address);
    auth.audit(
        &actor,
        "session.login",
        Some(&principal.account_id),
        serde_json::json!({"demo": true}),
    )
    .await;
    Ok(Some(principal))
}

/// The login page's form endpoints.
pub fn form_routes() -> Router<AppState> {
    Router::new()
        .route("/login", post(login_form))
        .route("/logout", post(logout_form))
}

#[derive(Deserialize)]
struct LoginForm {
    name: String,
    password: String,
    #[serde(default)]
    next: Option<String>,
}

/// Where to go after signing in: a local path only (never another site).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && n.len() <= 1024
                && !n.chars().any(char::is_control)
                && !n.starts_with("/login") =>
        {
            n.to_owned()
        }
        _ => "/".to_owned(),
    }
}

/// `POST /login` (a form): signs in and goes on (303), or back to the login page with what
/// went wrong. Works before the page's script has loaded.
async fn login_form(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    Extension(session): Extension<Session>,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = safe_next(form.next.as_deref());
    match state
        .auth
        .login(&session, &form.name, &form.password, &actor)
        .await
    {
        Ok(_) => Redirect::to(&next).into_response(),
        Err(AuthError::LoginFailed) => {
            Redirect::to(&format!("/login?error=failed&next={}", encode(&next))).into_response()
        }
        Err(AuthError::RateLimited { .. }) => {
            Redirect::to(&format!("/login?error=limited&next={}", encode(&next))).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /logout` (a form): ends the session and shows the login page.
async fn logout_form(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    Extension(session): Extension<Session>,
) -> Response {
    match state.auth.logout(&session, &actor).await {
        Ok(()) => (StatusCode::SEE_OTHER, [(header::LOCATION, "/login")]).into_response(),
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_login() {
        assert_eq!(safe_next(Some("/profiles/p1")), "/profiles/p1");
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil",
            "profiles",
            "/login?x",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_others_cannot() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.9, 198.51.100.7"),
        );
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            client_address(&h, Some(proxy), &[proxy]).as_deref(),
            Some("198.51.100.7")
        );
        let stranger: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(
            client_address(&h, Some(stranger), &[proxy]).as_deref(),
            Some("10.0.0.2")
        );
    }

    #[test]
    fn an_unlisted_route_is_refused_and_an_unserved_method_is_not_allowed() {
        let what = |m: &str, t: &str| target(Some(t), t, m).map(|_| ());
        assert_eq!(what("GET", "/api/v1/profiles"), Ok(()));
        assert_eq!(
            what("OPTIONS", "/api/v1/profiles"),
            Err(Unrouted::MethodNotAllowed)
        );
        assert_eq!(what("GET", "/api/v1/not-in-the-rules"), Err(Unrouted::Unlisted));
    }

    #[test]
    fn a_page_refusal_is_html_naming_the_permission() {
        let r = refuse(
            Surface::Page,
            AuthError::needs(policy::auth::Permission::ViewRoutes),
            "/",
            &HeaderMap::new(),
        );
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert!(r.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        assert!(forbidden_page("needs `view_routes` <b>").contains("needs `view_routes` &lt;b&gt;"));
    }

    #[test]
    fn redirect_targets_are_encoded() {
        assert_eq!(encode("/routes/r-1?x=a b&y"), "/routes/r-1%3Fx%3Da%20b%26y");
    }
}
