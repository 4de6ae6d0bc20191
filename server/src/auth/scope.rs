//! The checks that depend on what a request touches, after the rules table let it in: ONE
//! helper for every handler (REST and the UI's port).
//!
//! - A token scoped to profiles reaches only those profiles and their routes (lists are
//!   filtered; anything else is 403).
//! - Steering a route (start, manual action, work, complete, abandon, clearing its result)
//!   needs `operate_routes`, or `assign_office` when the route's caller is `office`
//!   (`policy::auth::may_steer`).

use super::Principal;
use crate::failure::Failure;
use policy::{
    api::{CallerKind, RouteSummary},
    auth::{may_start, may_steer},
};

/// Out of a scoped token's reach.
fn out_of_scope() -> Failure {
    Failure::Forbidden("This token reaches only the profiles it is scoped to, and their routes.".to_owned())
}

fn not_steerable() -> Failure {
    Failure::Forbidden(
        "This needs the `operate_routes` permission (`assign_office` steers only routes whose caller is `office`)."
            .to_owned(),
    )
}

/// May `principal` reach this profile?
pub fn profile(principal: &Principal, profile_id: &str) -> Result<(), Failure> {
    if principal.reaches_profile(profile_id) {
        Ok(())
    } else {
        Err(out_of_scope())
    }
}

/// May `principal` create a profile? A scoped token cannot: the new profile is outside its
/// scope.
pub fn create_profile(principal: &Principal) -> Result<(), Failure> {
    if principal.profile_ids.is_none() {
        Ok(())
    } else {
        Err(out_of_scope())
    }
}

/// What the caller wants to do with a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteUse {
    /// Read it, or report on it (evidence, results, leases: the rules table checked the right).
    Reach,
    /// Steer it.
    Steer,
}

/// May `principal` use `route` so?
pub fn route(principal: &Principal, route: &RouteSummary, intent: RouteUse) -> Result<(), Failure> {
    profile(principal, &route.profile_id)?;
    if intent == RouteUse::Steer && !may_steer(principal.permissions, route.caller.kind) {
        return Err(not_steerable());
    }
    Ok(())
}

/// May `principal` start a route on `profile_id` for a caller of `kind`? An `editor` route's
/// attempts are leased to whoever starts it, so that needs `run_dispatches` too.
pub fn start(principal: &Principal, profile_id: &str, kind: CallerKind) -> Result<(), Failure> {
    profile(principal, profile_id)?;
    if may_start(principal.permissions, kind) {
        Ok(())
    } else if may_steer(principal.permissions, kind) {
        Err(Failure::Forbidden(
            "An `editor` route runs its attempts through its caller: starting one needs `run_dispatches` as well as `operate_routes`."
                .to_owned(),
        ))
    } else {
        Err(not_steerable())
    }
}

/// Keeps what `principal` reaches.
pub fn retain<T>(principal: &Principal, items: &mut Vec<T>, profile_of: impl Fn(&T) -> &str) {
    if principal.profile_ids.is_some() {
        items.retain(|item| principal.reaches_profile(profile_of(item)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Via;
    use policy::auth::{BuiltinRole, Permissions};

    fn principal(role: BuiltinRole, scope: Option<&[&str]>) -> Principal {
        Principal {
            account_id: "a".into(),
            account: "ada".into(),
            role: role.name().into(),
            via: Via::Session,
            permissions: role.permissions(),
            profile_ids: scope.map(|s| s.iter().map(|x| x.to_string()).collect()),
            demo: false,
        }
    }

    #[test]
    fn office_starts_only_office_routes() {
        let office = principal(BuiltinRole::Office, None);
        assert!(start(&office, "p", CallerKind::Office).is_ok());
        assert!(start(&office, "p", CallerKind::KanbanTask).is_err());
        let op = principal(BuiltinRole::Operator, None);
        assert!(start(&op, "p", CallerKind::KanbanTask).is_ok());
    }

    #[test]
    fn a_scoped_principal_reaches_only_its_profiles() {
        let mut p = principal(BuiltinRole::Admin, Some(&["p1"]));
        p.permissions = Permissions::ALL;
        assert!(profile(&p, "p1").is_ok());
        assert!(profile(&p, "p2").is_err());
        assert!(create_profile(&p).is_err());
        let mut items = vec!["p1", "p2", "p1"];
        retain(&p, &mut items, |s| s);
        assert_eq!(items, ["p1", "p1"]);
    }
}
