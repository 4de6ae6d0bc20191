//! What the server's configuration file offers the profile editor: its ACP agents and HTTP
//! endpoints, by id and label. Read-only: agents and endpoints are configured on the server,
//! never through the UI (design contract 5).

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::api::RunnerOption;

/// The configured agents and endpoints, as the server has them now.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_runners() -> Result<Vec<RunnerOption>, AppError> {
    Ok(crate::backend::backend()?.list_runners().await?)
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::{
        fake::{block_on, with_backend, Call, FakeBackend},
        profiles::tests::port_errors,
    };

    #[test]
    fn the_configured_runners_come_back_as_the_port_lists_them() {
        let fake = FakeBackend::default();
        assert_eq!(with_backend(&fake, list_runners()), Ok(FakeBackend::runners()));
        assert_eq!(fake.calls(), vec![Call::ListRunners]);
    }

    #[test]
    fn a_server_without_a_configuration_offers_nothing() {
        let fake = FakeBackend::answering_runners(vec![]);
        assert_eq!(with_backend(&fake, list_runners()), Ok(vec![]));
        assert_eq!(fake.calls(), vec![Call::ListRunners]);
    }

    #[test]
    fn every_port_error_reaches_the_page_as_its_wire_error() {
        for (port, wire) in port_errors() {
            let fake = FakeBackend::failing(port.clone());
            assert_eq!(with_backend(&fake, list_runners()), Err(wire), "after {port:?}");
            assert_eq!(fake.calls(), vec![Call::ListRunners]);
        }
    }

    #[test]
    fn without_a_backend_in_context_the_page_says_unavailable() {
        let owner = Owner::new();
        let err = owner.with(|| block_on(list_runners())).unwrap_err();
        assert_eq!(err, AppError::Unavailable);
    }
}
