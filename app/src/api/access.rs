//! Access server functions: the caller's API tokens (anyone signed in), and accounts and
//! roles (administrators). The server's rules say who may call each; the port checks again.
//! Input is checked here with the functions the REST API uses (`policy::auth`), so the page,
//! the API and the command line refuse the same things with the same field paths.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::auth::{
    AccountCreate, AccountPatch, AccountView, RoleView, TokenCreate, TokenCreated, TokenView,
};

/// The caller's tokens (every account's, for administrators), newest first. Never a secret.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_tokens() -> Result<Vec<TokenView>, AppError> {
    Ok(crate::backend::backend()?.tokens().await?)
}

/// A new token for the caller's own account; the answer holds its secret, this once.
#[server(prefix = "/api/ui", input = Json)]
pub async fn create_token(input: TokenCreate) -> Result<TokenCreated, AppError> {
    input.check()?;
    Ok(crate::backend::backend()?.create_token(input).await?)
}

/// Revokes a token: its next request gets 401.
#[server(prefix = "/api/ui", input = Json)]
pub async fn revoke_token(id: String) -> Result<(), AppError> {
    Ok(crate::backend::backend()?.revoke_token(id).await?)
}

/// Every account, by name (administrators).
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_accounts() -> Result<Vec<AccountView>, AppError> {
    Ok(crate::backend::backend()?.accounts().await?)
}

/// Built-in roles, then custom ones (administrators).
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_roles() -> Result<Vec<RoleView>, AppError> {
    Ok(crate::backend::backend()?.roles().await?)
}

/// A new account (administrators).
#[server(prefix = "/api/ui", input = Json)]
pub async fn create_account(input: AccountCreate) -> Result<AccountView, AppError> {
    input.check()?;
    Ok(crate::backend::backend()?.create_account(input).await?)
}

/// A new role, disabled or enabled, or a new password (administrators).
#[server(prefix = "/api/ui", input = Json)]
pub async fn update_account(id: String, patch: AccountPatch) -> Result<AccountView, AppError> {
    patch.check()?;
    Ok(crate::backend::backend()?.update_account(id, patch).await?)
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::{
        fake::{with_backend, Call, FakeBackend},
        profiles::tests::port_errors,
    };
    use policy::auth::{Permission, Permissions};

    fn token_input(name: &str) -> TokenCreate {
        TokenCreate {
            name: name.into(),
            permissions: Permissions::of(&[Permission::ViewRoutes]),
            profile_ids: None,
            expires_in_days: 30,
        }
    }

    #[test]
    fn a_new_token_reaches_the_port_and_its_secret_comes_back_once() {
        let fake = FakeBackend::default();
        let created = with_backend(&fake, create_token(token_input("ci"))).unwrap();
        assert_eq!(created.secret, "rct_stored");
        assert_eq!(created.token, FakeBackend::token());
        assert_eq!(
            fake.calls(),
            vec![Call::CreateToken("ci".into(), vec!["view_routes".into()])]
        );
    }

    #[test]
    fn a_token_the_api_would_refuse_never_reaches_the_port() {
        let fake = FakeBackend::default();
        let mut input = token_input("");
        input.expires_in_days = 0;
        let err = with_backend(&fake, create_token(input)).unwrap_err();
        assert_eq!(err.at("name").count(), 1, "{err:?}");
        assert_eq!(err.at("expires_in_days").count(), 1, "{err:?}");
        assert!(fake.calls().is_empty());
    }

    #[test]
    fn an_account_the_api_would_refuse_never_reaches_the_port() {
        let fake = FakeBackend::default();
        let input = AccountCreate {
            name: "has space".into(),
            role: "viewer".into(),
            password: "short".into(),
        };
        let err = with_backend(&fake, create_account(input)).unwrap_err();
        assert_eq!(err.at("name").count(), 1, "{err:?}");
        assert_eq!(err.at("password").count(), 1, "{err:?}");
        let err = with_backend(&fake, update_account("acct-1".into(), AccountPatch::default())).unwrap_err();
        assert!(matches!(err, AppError::Invalid { .. }), "{err:?}");
        assert!(fake.calls().is_empty());
    }

    #[test]
    fn account_changes_reach_the_port_without_the_password() {
        let fake = FakeBackend::default();
        let patch = AccountPatch {
            role: Some("operator".into()),
            disabled: None,
            password: Some("a new long passphrase".into()),
        };
        assert_eq!(
            with_backend(&fake, update_account("acct-1".into(), patch)),
            Ok(FakeBackend::account())
        );
        let calls = fake.calls();
        let Call::UpdateAccount(id, shown) = &calls[0] else {
            panic!("{calls:?}")
        };
        assert_eq!(id, "acct-1");
        assert!(
            shown.contains("operator") && !shown.contains("passphrase"),
            "{shown}"
        );
    }

    #[test]
    fn every_port_error_reaches_the_page_as_its_wire_error() {
        for (port, wire) in port_errors() {
            let fake = FakeBackend::failing(port.clone());
            assert_eq!(
                with_backend(&fake, list_tokens()),
                Err(wire.clone()),
                "after {port:?}"
            );
            assert_eq!(with_backend(&fake, revoke_token("t".into())), Err(wire.clone()));
            assert_eq!(with_backend(&fake, list_accounts()), Err(wire.clone()));
            assert_eq!(with_backend(&fake, list_roles()), Err(wire));
            assert_eq!(
                fake.calls(),
                vec![
                    Call::Tokens,
                    Call::RevokeToken("t".into()),
                    Call::Accounts,
                    Call::Roles
                ]
            );
        }
    }
}
