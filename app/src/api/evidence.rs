//! "Try an error" server functions: the server's classifier on evidence a person pasted or
//! picked from the catalogue's fixtures, with nothing stored or sent. The evidence is parsed
//! once, on the server, by the classifier's own bounded reader (the one `recourse classify` and
//! every route's evidence go through: texts and lists cut to its bounds, the cut recorded),
//! inside the request body limit every server function has
//! (`policy::limits::MAX_REQUEST_BODY_BYTES`). So the dry run reads what `recourse classify`
//! reads, as it reads it, on the server's clock; what it cannot read is refused at `envelope`.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::trial::EvidenceTrial;
use serde_json::Value;

/// Classifies `envelope` as of now: its classification, its gate as given and after output.
#[server(prefix = "/api/ui", input = Json)]
pub async fn try_evidence(envelope: Value) -> Result<EvidenceTrial, AppError> {
    Ok(crate::backend::backend()?.try_evidence(envelope).await?)
}

/// The names of the catalogue's fixtures (`source/case`), sorted.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_fixtures() -> Result<Vec<String>, AppError> {
    Ok(crate::backend::backend()?.fixtures().await?)
}

/// One fixture's evidence envelope (its `input`), by name.
#[server(prefix = "/api/ui", input = Json)]
pub async fn fixture_evidence(name: String) -> Result<Value, AppError> {
    Ok(crate::backend::backend()?.fixture(name).await?)
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::{
        fake::{with_backend, Call, FakeBackend},
        profiles::tests::port_errors,
    };
    use serde_json::json;

    #[test]
    fn evidence_reaches_the_port_as_sent_and_its_trial_comes_back() {
        let fake = FakeBackend::default();
        let envelope = json!({"items": [{"kind": "stderr", "lines": ["overloaded"]}]});
        let trial = with_backend(&fake, try_evidence(envelope.clone())).unwrap();
        assert_eq!(trial, FakeBackend::trial());
        assert_eq!(fake.calls(), vec![Call::TryEvidence(envelope)]);
    }

    #[test]
    fn every_port_error_reaches_the_panel_as_its_wire_error() {
        for (port, wire) in port_errors() {
            let fake = FakeBackend::failing(port.clone());
            let envelope = json!({"items": []});
            assert_eq!(with_backend(&fake, try_evidence(envelope)), Err(wire.clone()));
            assert_eq!(with_backend(&fake, list_fixtures()), Err(wire.clone()));
            assert_eq!(with_backend(&fake, fixture_evidence("a/b".into())), Err(wire));
        }
    }
}
