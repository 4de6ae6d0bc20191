//! Who is signed in, as the pages see it. The server decides (its rules layer resolves the
//! session or token of every request) and hands the answer to the app through the request:
//! [`current_session`] reads it, so the page rendered on the server and the page hydrated in
//! the browser show the same thing. Nothing here decides access; the server enforces every
//! rule whatever the UI shows.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::auth::{AuditEntry, Permission, Permissions, WhoAmI};
use serde::{Deserialize, Serialize};

/// The request's session, as the server resolved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    /// Who is signed in, if anyone.
    pub viewer: Option<WhoAmI>,
    /// Whether any account exists yet (the login page says how to make the first one).
    pub accounts_exist: bool,
    /// The server runs `serve --demo` (visitors are signed into the demo account).
    pub demo: bool,
}

/// The command that creates the first administrator, as the login page shows it.
pub const FIRST_ADMIN_COMMAND: &str = "recourse user add NAME --role admin";

/// The session of the request being served (public: the login page needs it).
#[server(prefix = "/api/ui", input = Json)]
pub async fn current_session() -> Result<SessionView, AppError> {
    use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<SessionView>().cloned())
        .ok_or(AppError::Unavailable)
}

/// One page of the audit log, newest first, older than `before` (a `seq`) when given.
/// Administrators only (the server's rules say so; the port checks again).
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_audit(before: Option<i64>) -> Result<Vec<AuditEntry>, AppError> {
    Ok(crate::backend::backend()?.audit_page(before).await?)
}

/// The session, read once per page load and shared by the navigation and the pages.
pub type SessionResource = crate::codec::Resource<Result<SessionView, AppError>>;

/// Provides [`SessionResource`] to the whole app.
pub fn provide_session() -> SessionResource {
    let session = crate::codec::resource(|| (), |_| current_session());
    provide_context(session);
    session
}

/// Who holds a right, as the pages say it when a control is not offered.
pub fn holders(permission: Permission) -> &'static str {
    match permission {
        Permission::ManageProfiles => {
            "profile managers and administrators (the `manage_profiles` permission)"
        }
        Permission::OperateRoutes => {
            "operators, profile managers and administrators (the `operate_routes` permission)"
        }
        Permission::ViewRoutes => "anyone with the `view_routes` permission",
        Permission::AssignOffice => "Office assigners (the `assign_office` permission), for Office routes",
        Permission::RunDispatches => "external runners and adapters (the `run_dispatches` permission)",
        Permission::Admin => "administrators",
    }
}

/// Renders `children` only when the signed-in person may (`allowed` of their permissions);
/// otherwise a short note saying whose the control is. The server enforces the same rule
/// whatever is shown here.
#[component]
pub fn IfAllowed(
    /// Whether these permissions allow the control.
    allowed: fn(Permissions) -> bool,
    /// Said instead of the control: whose it is.
    #[prop(into)]
    note: String,
    children: ChildrenFn,
) -> impl IntoView {
    let session = expect_context::<SessionResource>();
    let children = StoredValue::new(children);
    let note = StoredValue::new(note);
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let may = matches!(session.await, Ok(v) if v.viewer.as_ref().is_some_and(|w| allowed(w.permissions)));
                if may {
                    children.read_value()().into_any()
                } else {
                    view! {
                        <p class="mt-2 text-sm text-slate-700" data-testid="not-yours">{note.get_value()}</p>
                    }
                        .into_any()
                }
            })}
        </Suspense>
    }
}

/// `manage_profiles`: the only right that edits policies.
pub fn manages_profiles(p: Permissions) -> bool {
    p.contains(Permission::ManageProfiles)
}
