//! Sessions, accounts, roles, API tokens and the audit log under `/api/v1`. What each endpoint
//! needs is in `crate::auth::rules`; these handlers parse, call `crate::auth`, answer.

use super::{extract::AuditQuery, json_body};
use crate::{
    auth::{Actor, AuthError, Principal, Via},
    guard::json_only,
    state::AppState,
};
use axum::{
    body::Bytes,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, patch, put},
    Extension, Json, Router,
};
use policy::auth::{AccountCreate, AccountPatch, LoginRequest, RoleCreate, RoleUpdate, TokenCreate};
use tower_sessions::Session;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/session",
            json_only(get(who_am_i).post(login).delete(logout)),
        )
        .route(
            "/api/v1/accounts",
            json_only(get(list_accounts).post(create_account)),
        )
        .route("/api/v1/accounts/{id}", json_only(patch(update_account)))
        .route("/api/v1/roles", json_only(get(list_roles).post(create_role)))
        .route(
            "/api/v1/roles/{name}",
            json_only(put(update_role).delete(delete_role)),
        )
        .route("/api/v1/tokens", json_only(get(list_tokens).post(create_token)))
        .route(
            "/api/v1/tokens/{id}",
            json_only(axum::routing::delete(revoke_token)),
        )
        .route("/api/v1/audit", get(audit))
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, crate::failure::Failure> {
    json_body(body)
}

/// Signs in: 204 and the session cookie, or 401 `login_failed` (one answer whatever was
/// wrong), or 429 with `Retry-After`.
async fn login(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Extension(session): Extension<Session>,
    body: Bytes,
) -> Response {
    let request: LoginRequest = match parse(&body) {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match s
        .auth
        .login(&session, &request.name, &request.password, &actor)
        .await
    {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn who_am_i(Extension(principal): Extension<Principal>) -> Response {
    Json(principal.who_am_i()).into_response()
}

/// Ends the session (a token has none: 204 all the same).
async fn logout(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Extension(principal): Extension<Principal>,
    Extension(session): Extension<Session>,
) -> Response {
    if principal.via != Via::Session {
        return StatusCode::NO_CONTENT.into_response();
    }
    match s.auth.logout(&session, &actor).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn list_accounts(State(s): State<AppState>) -> Response {
    match s.auth.store().accounts().await {
        Ok(rows) => Json(rows.iter().map(|a| a.view()).collect::<Vec<_>>()).into_response(),
        Err(e) => AuthError::from(e).into_response(),
    }
}

async fn create_account(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    body: Bytes,
) -> Response {
    let input: AccountCreate = match parse(&body) {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match s.auth.create_account(&actor, &input, false).await {
        Ok(a) => (StatusCode::CREATED, Json(a.view())).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn update_account(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let patch: AccountPatch = match parse(&body) {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match s.auth.update_account(&actor, &id, &patch).await {
        Ok(a) => Json(a.view()).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn list_roles(State(s): State<AppState>) -> Response {
    match s.auth.roles().await {
        Ok(roles) => Json(roles).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn create_role(State(s): State<AppState>, Extension(actor): Extension<Actor>, body: Bytes) -> Response {
    let input: RoleCreate = match parse(&body) {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match s.auth.create_role(&actor, &input).await {
        Ok(role) => (StatusCode::CREATED, Json(role)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn update_role(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let input: RoleUpdate = match parse(&body) {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match s.auth.update_role(&actor, &name, &input).await {
        Ok(role) => Json(role).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn delete_role(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Path(name): Path<String>,
) -> Response {
    match s.auth.delete_role(&actor, &name).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn list_tokens(State(s): State<AppState>, Extension(principal): Extension<Principal>) -> Response {
    match s.auth.visible_tokens(&principal).await {
        Ok(rows) => Json(rows.iter().map(|t| t.view()).collect::<Vec<_>>()).into_response(),
        Err(e) => e.into_response(),
    }
}

/// 201 with the secret, shown this once.
async fn create_token(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Extension(principal): Extension<Principal>,
    body: Bytes,
) -> Response {
    let input: TokenCreate = match parse(&body) {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match s.auth.create_token(&actor, &principal, &input).await {
        Ok(created) => (StatusCode::CREATED, Json(created)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn revoke_token(
    State(s): State<AppState>,
    Extension(actor): Extension<Actor>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    match s.auth.revoke_token(&actor, &principal, &id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The audit log, newest first: `?before=seq` pages back, `limit` rows (at most 500).
async fn audit(State(s): State<AppState>, q: AuditQuery) -> Response {
    match s.auth.store().audit_page(q.before, q.limit).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => AuthError::from(e).into_response(),
    }
}

/// The OpenAPI description of these endpoints, merged into the API's document, with the two
/// ways to authenticate.
pub(crate) fn extend_openapi(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::{
        openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
        },
        OpenApi,
    };
    doc.merge(AuthDoc::openapi());
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API token (`rct_...`) from `POST /api/v1/tokens` or `recourse token add`. Never in a query string.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        "session",
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            crate::auth::session::COOKIE,
            "The browser session from `POST /api/v1/session` (or the login page). Writes must come from Recourse's own pages.",
        ))),
    );
    doc.security = Some(vec![
        SecurityRequirement::new("bearer", Vec::<String>::new()),
        SecurityRequirement::new("session", Vec::<String>::new()),
    ]);
}

#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        openapi_paths::login,
        openapi_paths::who_am_i,
        openapi_paths::logout,
        openapi_paths::list_accounts,
        openapi_paths::create_account,
        openapi_paths::update_account,
        openapi_paths::list_roles,
        openapi_paths::create_role,
        openapi_paths::update_role,
        openapi_paths::delete_role,
        openapi_paths::list_tokens,
        openapi_paths::create_token,
        openapi_paths::revoke_token,
        openapi_paths::audit,
    ),
    components(schemas(
        policy::auth::Permission,
        policy::auth::PrincipalKind,
        policy::auth::LoginRequest,
        policy::auth::WhoAmI,
        policy::auth::AccountView,
        policy::auth::AccountCreate,
        policy::auth::AccountPatch,
        policy::auth::RoleView,
        policy::auth::RoleCreate,
        policy::auth::RoleUpdate,
        policy::auth::TokenCreate,
        policy::auth::TokenView,
        policy::auth::TokenCreated,
        policy::auth::ActorKind,
        policy::auth::AuditEntry,
    ))
)]
struct AuthDoc;

/// Path descriptions for the OpenAPI document (annotations only).
#[allow(dead_code)]
mod openapi_paths {
    use policy::{
        api::ApiError,
        auth::{
            AccountCreate, AccountPatch, AccountView, AuditEntry, LoginRequest, RoleCreate, RoleUpdate,
            RoleView, TokenCreate, TokenCreated, TokenView, WhoAmI,
        },
    };

    #[utoipa::path(post, path = "/api/v1/session", request_body = LoginRequest, security(()), responses(
        (status = 204, description = "Signed in: the `recourse_session` cookie (HttpOnly, SameSite=Lax) under a new session id"),
        (status = 401, body = ApiError, description = "`login_failed`: the name or the password is wrong (one answer whether or not the account exists)"),
        (status = 429, body = ApiError, description = "`rate_limited`: too many attempts for this name or from this address; see `Retry-After`")))]
    pub(crate) fn login() {}

    #[utoipa::path(get, path = "/api/v1/session", responses(
        (status = 200, body = WhoAmI), (status = 401, body = ApiError)))]
    pub(crate) fn who_am_i() {}

    #[utoipa::path(delete, path = "/api/v1/session", responses(
        (status = 204, description = "The session ended (a token: nothing to end)"), (status = 401, body = ApiError)))]
    pub(crate) fn logout() {}

    #[utoipa::path(get, path = "/api/v1/accounts", responses(
        (status = 200, body = [AccountView]), (status = 403, body = ApiError)))]
    pub(crate) fn list_accounts() {}

    #[utoipa::path(post, path = "/api/v1/accounts", request_body = AccountCreate, responses(
        (status = 201, body = AccountView), (status = 409, body = ApiError, description = "The name is taken"),
        (status = 422, description = "Validation errors with field paths")))]
    pub(crate) fn create_account() {}

    #[utoipa::path(patch, path = "/api/v1/accounts/{id}", params(("id" = String, Path)), request_body = AccountPatch,
        responses((status = 200, body = AccountView), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "The change would leave no enabled administrator"),
        (status = 422, description = "Validation errors with field paths")))]
    pub(crate) fn update_account() {}

    #[utoipa::path(get, path = "/api/v1/roles", responses((status = 200, body = [RoleView])))]
    pub(crate) fn list_roles() {}

    #[utoipa::path(post, path = "/api/v1/roles", request_body = RoleCreate, responses(
        (status = 201, body = RoleView), (status = 409, body = ApiError),
        (status = 422, description = "Validation errors with field paths")))]
    pub(crate) fn create_role() {}

    #[utoipa::path(put, path = "/api/v1/roles/{name}", params(("name" = String, Path)), request_body = RoleUpdate,
        responses((status = 200, body = RoleView, description = "Its accounts have the new permissions from their next request"),
        (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "A built-in role (they are fixed), or the change would leave no enabled administrator"),
        (status = 422, description = "Validation errors with field paths")))]
    pub(crate) fn update_role() {}

    #[utoipa::path(delete, path = "/api/v1/roles/{name}", params(("name" = String, Path)), responses(
        (status = 204, description = "Deleted"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "A built-in role, or accounts hold it")))]
    pub(crate) fn delete_role() {}

    #[utoipa::path(get, path = "/api/v1/tokens", responses(
        (status = 200, body = [TokenView], description = "Your account's tokens (every token, for administrators); never a secret")))]
    pub(crate) fn list_tokens() {}

    #[utoipa::path(post, path = "/api/v1/tokens", request_body = TokenCreate, responses(
        (status = 201, body = TokenCreated, description = "The secret is in this answer only"),
        (status = 403, body = ApiError, description = "A permission you do not hold, or profiles outside your scope"),
        (status = 422, description = "Validation errors with field paths")))]
    pub(crate) fn create_token() {}

    #[utoipa::path(delete, path = "/api/v1/tokens/{id}", params(("id" = String, Path)), responses(
        (status = 204, description = "Revoked: its next request gets 401"), (status = 404, body = ApiError)))]
    pub(crate) fn revoke_token() {}

    #[utoipa::path(get, path = "/api/v1/audit", params(
        ("before" = Option<i64>, Query, description = "Only rows before this `seq`"),
        ("limit" = Option<u32>, Query, description = "Rows to return, 1 to 500 (default 100)")),
        responses((status = 200, body = [AuditEntry], description = "Newest first"),
        (status = 422, description = "`before` not a whole number, or `limit` not one from 1 to 500, at the parameter's name")))]
    pub(crate) fn audit() {}
}
