//! Profile server functions: list, read, create, save, delete.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::api::{Profile, ProfileInput, ProfileSummary};

/// Every profile, by name.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_profiles() -> Result<Vec<ProfileSummary>, AppError> {
    Ok(crate::backend::backend()?.list_profiles().await?)
}

/// One profile with its normalized policy document.
#[server(prefix = "/api/ui", input = Json)]
pub async fn get_profile(id: String) -> Result<Profile, AppError> {
    Ok(crate::backend::backend()?.get_profile(id).await?)
}

/// Creates a profile; answers with the stored, normalized profile. The input is parsed here,
/// once, with the function the REST API uses (`policy::input`); the port gets the parsed one.
#[server(prefix = "/api/ui", input = Json)]
pub async fn create_profile(input: ProfileInput) -> Result<Profile, AppError> {
    let profile = policy::input::ValidatedProfile::parse(&input)?;
    Ok(crate::backend::backend()?.create_profile(profile).await?)
}

/// Replaces a profile; answers with the stored, normalized profile.
#[server(prefix = "/api/ui", input = Json)]
pub async fn save_profile(id: String, input: ProfileInput) -> Result<Profile, AppError> {
    let profile = policy::input::ValidatedProfile::parse(&input)?;
    Ok(crate::backend::backend()?.update_profile(id, profile).await?)
}

/// Deletes a profile that has no open routes.
#[server(prefix = "/api/ui", input = Json)]
pub async fn delete_profile(id: String) -> Result<(), AppError> {
    Ok(crate::backend::backend()?.delete_profile(id).await?)
}

#[cfg(all(test, feature = "ssr"))]
pub(crate) mod tests {
    use super::*;
    use crate::{
        api::fake::{block_on, with_backend, Call, FakeBackend},
        backend::BackendError,
    };
    use policy::wire::{ValidationCode, ValidationError, ValidationErrors};
    use serde_json::json;

    fn input(policy: serde_json::Value) -> ProfileInput {
        ProfileInput {
            name: "Main".into(),
            kind: policy::api::ProfileKind::Dynamic,
            description: None,
            targets: vec![],
            policy,
            expected_revision: Some(3),
            notifications: Vec::new(),
        }
    }

    /// A valid version-1 document with one candidate `a`, its transient `max_retries` as given.
    fn document(max_retries: u32) -> serde_json::Value {
        json!({"version": 1, "candidates": [{"id": "a",
            "transient": {"retry": {"enabled": true, "max_retries": max_retries, "initial_interval_seconds": 5},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"},
            "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                     "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"}}]})
    }

    /// Every port error and the wire error a server function must turn it into.
    pub(crate) fn port_errors() -> Vec<(BackendError, AppError)> {
        let field = ValidationError {
            path: "candidates[1].id".into(),
            code: ValidationCode::Duplicate,
            message: "Candidate id `a` is already used by candidates[0].".into(),
        };
        vec![
            (BackendError::NotFound { what: "profile" }, AppError::NotFound),
            (
                BackendError::Invalid(ValidationErrors {
                    errors: vec![field.clone()],
                }),
                AppError::Invalid { errors: vec![field] },
            ),
            (
                BackendError::Conflict("the profile has 2 routes; it is kept".into()),
                AppError::Conflict {
                    message: "the profile has 2 routes; it is kept".into(),
                },
            ),
            (BackendError::Unavailable, AppError::Unavailable),
            (
                BackendError::Forbidden("This needs the `manage_profiles` permission.".into()),
                AppError::Forbidden {
                    message: "This needs the `manage_profiles` permission.".into(),
                },
            ),
        ]
    }

    #[test]
    fn an_out_of_range_value_comes_back_on_its_field_without_reaching_the_backend() {
        let fake = FakeBackend::default();
        let err = with_backend(&fake, save_profile("p1".into(), input(document(11)))).unwrap_err();
        let field = err
            .at("candidates[0].transient.retry.max_retries")
            .next()
            .cloned();
        assert_eq!(field.map(|e| e.code), Some(ValidationCode::OutOfRange));
        assert_eq!(fake.calls(), vec![]);
    }

    #[test]
    fn a_bad_target_identifier_comes_back_on_its_field_without_reaching_the_backend() {
        let fake = FakeBackend::default();
        let mut bad = input(json!({"legacy": true}));
        bad.targets = vec![policy::api::CandidateTarget {
            id: "a".into(),
            dispatcher: policy::api::DispatcherKind::Http,
            provider_id: Some("anthropic".into()),
            model_id: Some("x".repeat(policy::limits::MAX_CANDIDATE_ID_CHARS + 1)),
            label: None,
            runner: Some("mini".into()),
            script: vec![],
        }];
        let err = with_backend(&fake, create_profile(bad)).unwrap_err();
        let codes: Vec<_> = err.at("targets[0].model_id").map(|e| e.code).collect();
        assert_eq!(codes, vec![ValidationCode::TooLong]);
        assert_eq!(err.at("targets[0].provider_id").count(), 0);
        assert_eq!(fake.calls(), vec![]);
    }

    #[test]
    fn a_valid_profile_goes_to_the_port_parsed_and_the_stored_one_comes_back() {
        let fake = FakeBackend::default();
        let edited = input(document(10));
        let saved = with_backend(&fake, save_profile("p1".into(), edited.clone()));
        assert_eq!(saved, Ok(FakeBackend::profile()));
        // A legacy shape is normalized by the same parse the REST API runs.
        let legacy = input(json!({"on_error": "try_next", "candidates": [{"id": "a"}]}));
        let created = with_backend(&fake, create_profile(legacy.clone()));
        assert_eq!(created, Ok(FakeBackend::profile()));
        let parsed = |i: &ProfileInput| policy::input::ValidatedProfile::parse(i).unwrap();
        assert_eq!(
            fake.calls(),
            vec![
                Call::UpdateProfile("p1".into(), parsed(&edited)),
                Call::CreateProfile(parsed(&legacy))
            ]
        );
        assert!(parsed(&legacy).normalized_from_legacy());
    }

    #[test]
    fn reading_and_deleting_ask_the_port_for_the_profile_named() {
        let fake = FakeBackend::default();
        assert_eq!(
            with_backend(&fake, get_profile("p7".into())),
            Ok(FakeBackend::profile())
        );
        assert_eq!(with_backend(&fake, delete_profile("p8".into())), Ok(()));
        let listed = with_backend(&fake, list_profiles()).unwrap();
        assert_eq!(
            listed.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["stored-id"]
        );
        assert_eq!(
            fake.calls(),
            vec![
                Call::GetProfile("p7".into()),
                Call::DeleteProfile("p8".into()),
                Call::ListProfiles
            ]
        );
    }

    #[test]
    fn every_port_error_reaches_the_page_as_its_wire_error() {
        for (port, wire) in port_errors() {
            let fake = FakeBackend::failing(port.clone());
            let each = [
                ("list", with_backend(&fake, list_profiles()).map(drop)),
                ("get", with_backend(&fake, get_profile("p1".into())).map(drop)),
                (
                    "create",
                    with_backend(&fake, create_profile(input(document(1)))).map(drop),
                ),
                (
                    "save",
                    with_backend(&fake, save_profile("p1".into(), input(document(1)))).map(drop),
                ),
                ("delete", with_backend(&fake, delete_profile("p1".into()))),
            ];
            for (function, result) in each {
                assert_eq!(result, Err(wire.clone()), "{function} after {port:?}");
            }
            assert_eq!(fake.calls().len(), 5, "each function asked the port once");
        }
    }

    #[test]
    fn without_a_backend_in_context_the_page_says_unavailable() {
        let owner = Owner::new();
        let err = owner.with(|| block_on(list_profiles())).unwrap_err();
        assert_eq!(err, AppError::Unavailable);
    }
}
