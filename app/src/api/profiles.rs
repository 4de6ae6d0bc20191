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

/// Creates a profile; answers with the stored, normalized profile.
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
mod tests {
    use super::*;
    use crate::api::fake::{with_backend, FakeBackend};
    use policy::wire::ValidationCode;
    use serde_json::json;

    fn input(policy: serde_json::Value) -> ProfileInput {
        ProfileInput {
            name: "Main".into(),
            description: None,
            targets: vec![],
            policy,
            expected_revision: None,
        }
    }

    #[test]
    fn an_out_of_range_value_comes_back_on_its_field_without_reaching_the_backend() {
        let fake = FakeBackend::default();
        let doc = json!({"version": 1, "candidates": [{"id": "a",
            "transient": {"retry": {"enabled": true, "max_retries": 11, "initial_interval_seconds": 5},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"},
            "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                     "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"}}]});
        let err = with_backend(&fake, save_profile("p1".into(), input(doc))).unwrap_err();
        let field = err
            .at("candidates[0].transient.retry.max_retries")
            .next()
            .cloned();
        assert_eq!(field.map(|e| e.code), Some(ValidationCode::OutOfRange));
        assert_eq!(fake.calls(), Vec::<String>::new());
    }

    #[test]
    fn the_backends_field_errors_and_missing_profiles_map_to_the_wire_error() {
        let fake = FakeBackend::default();
        let err = with_backend(&fake, get_profile("nope".into())).unwrap_err();
        assert_eq!(err, AppError::NotFound);
        let valid = json!({"on_error": "try_next", "candidates": [{"id": "a"}]});
        let err = with_backend(&fake, save_profile("dup".into(), input(valid))).unwrap_err();
        assert_eq!(err.at("candidates[1].id").count(), 1);
        assert_eq!(fake.calls(), vec!["get_profile nope", "update_profile dup"]);
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
            script: vec![],
        }];
        let err = with_backend(&fake, create_profile(bad)).unwrap_err();
        let codes: Vec<_> = err.at("targets[0].model_id").map(|e| e.code).collect();
        assert_eq!(codes, vec![ValidationCode::TooLong]);
        assert_eq!(err.at("targets[0].provider_id").count(), 0);
        assert_eq!(fake.calls(), Vec::<String>::new());
    }

    #[test]
    fn deleting_a_profile_answers_ok_or_the_servers_reason_for_keeping_it() {
        let fake = FakeBackend::default().refusing_to_delete("busy");
        assert_eq!(with_backend(&fake, delete_profile("free".into())), Ok(()));
        match with_backend(&fake, delete_profile("busy".into())) {
            Err(AppError::Conflict { message }) => assert!(message.contains("routes"), "{message}"),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(fake.calls(), vec!["delete_profile free", "delete_profile busy"]);
    }

    #[test]
    fn without_a_backend_in_context_the_page_says_unavailable() {
        let owner = Owner::new();
        let err = owner.with(|| futures_executor(list_profiles())).unwrap_err();
        assert_eq!(err, AppError::Unavailable);
    }

    fn futures_executor<F: std::future::Future>(f: F) -> F::Output {
        crate::api::fake::block_on(f)
    }
}
