//! The profile service the REST API and the UI's backend share. Input arrives already parsed
//! (`policy::input::ValidatedProfile`, at each surface's boundary); a profile edit writes a
//! new revision, and routes read the current one at their next decision, so pending timers and
//! history are never touched.

use crate::{
    config::RunnerConfig,
    engine::{Engine, EngineError},
    store::{new_id, ProfileDelete, ProfileUpdate},
};
use policy::{
    api::{CandidateTarget, DispatcherKind, Profile, ProfileSummary},
    document::{ValidationCode, ValidationError, ValidationErrors},
    input::{check_identifier, ValidatedProfile},
    notify::NotificationRule,
};

/// Checks every target's runner against the server's configuration (an `acp` target names a
/// configured agent, an `http` target a configured endpoint; a 422 at `targets[i].runner`
/// otherwise) and fills a target's provider and model ids from its runner's configuration when
/// the profile gives none, so circuits and evidence know them.
pub fn bind_runners(targets: &mut [CandidateTarget], config: &RunnerConfig) -> Result<(), ValidationErrors> {
    let mut errors = Vec::new();
    for (i, t) in targets.iter_mut().enumerate() {
        let Some(runner) = t.runner.as_deref() else {
            continue;
        };
        let (known, provider, model) = match t.dispatcher {
            DispatcherKind::Acp => match config.agent(runner) {
                Some(a) => (true, a.provider_id.clone(), a.model_id.clone()),
                None => (false, None, None),
            },
            DispatcherKind::Http => match config.endpoint(runner) {
                Some(e) => (true, e.provider_id.clone(), Some(e.model.clone())),
                None => (false, None, None),
            },
            DispatcherKind::Simulated | DispatcherKind::External => (true, None, None),
        };
        if !known {
            let what = if t.dispatcher == DispatcherKind::Acp {
                "agent"
            } else {
                "endpoint"
            };
            errors.push(ValidationError {
                path: format!("targets[{i}].runner"),
                code: ValidationCode::UnknownField,
                message: format!(
                    "The server's configuration has no {what} with this id; choose one it lists, or ask an operator to add it."
                ),
            });
            continue;
        }
        if t.provider_id.is_none() {
            t.provider_id = provider.filter(|p| check_identifier(p, "").is_ok());
        }
        if t.model_id.is_none() {
            t.model_id = model.filter(|m| check_identifier(m, "").is_ok());
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors { errors })
    }
}

/// Checks that every channel a profile's notification rules name is one the server has now
/// (`in_app`, or a `[[channel]]` of the configuration): a 422 at
/// `notifications[i].channels[j]` otherwise. A channel that later leaves the configuration is
/// skipped when an event is queued.
pub fn check_channels(rules: &[NotificationRule], config: &RunnerConfig) -> Result<(), ValidationErrors> {
    let mut errors = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for (c, channel) in rule.channels.iter().enumerate() {
            if !config.notify.has_channel(channel) {
                errors.push(ValidationError {
                    path: format!("notifications[{i}].channels[{c}]"),
                    code: ValidationCode::UnknownField,
                    message:
                        "The server's configuration has no channel with this id; choose `in_app` or one it \
                              lists, or ask an operator to add it."
                            .to_owned(),
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors { errors })
    }
}

/// Both checks against the configuration: runners and channels, every problem at once.
fn check_config(profile: &ValidatedProfile, config: &RunnerConfig) -> Result<(), ValidationErrors> {
    let mut errors = Vec::new();
    if let Err(e) = bind_runners(&mut profile.targets().to_vec(), config) {
        errors.extend(e.errors);
    }
    if let Err(e) = check_channels(profile.notifications(), config) {
        errors.extend(e.errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors { errors })
    }
}

pub async fn list(engine: &Engine) -> Result<Vec<ProfileSummary>, EngineError> {
    Ok(engine.store().list_profiles().await?)
}

pub async fn get(engine: &Engine, id: &str) -> Result<Profile, EngineError> {
    engine
        .store()
        .profile(id)
        .await?
        .ok_or_else(|| EngineError::ProfileNotFound(id.to_owned()))
}

pub async fn create(engine: &Engine, profile: ValidatedProfile) -> Result<Profile, EngineError> {
    insert_new(engine, new_id("pf", engine.now()), profile).await
}

/// Creates or replaces a profile with a chosen id (the demo seeds stable ids).
pub async fn put(engine: &Engine, id: &str, profile: ValidatedProfile) -> Result<Profile, EngineError> {
    match update(engine, id, profile.clone()).await {
        Err(EngineError::ProfileNotFound(_)) => insert_new(engine, id.to_owned(), profile).await,
        other => other,
    }
}

/// Stores `profile` as revision 1 of a new profile `id`.
async fn insert_new(engine: &Engine, id: String, profile: ValidatedProfile) -> Result<Profile, EngineError> {
    let now = engine.now();
    let config = engine.runners().current();
    check_config(&profile, &config).map_err(EngineError::Invalid)?;
    let mut profile = profile.into_profile(id, 1, now, now);
    bind_runners(&mut profile.targets, &config).map_err(EngineError::Invalid)?;
    let _writer = engine.writer().await;
    engine.store().insert_profile(&profile).await?;
    Ok(profile)
}

pub async fn update(engine: &Engine, id: &str, profile: ValidatedProfile) -> Result<Profile, EngineError> {
    let now = engine.now();
    let expected = profile.expected_revision();
    // The same check as a new profile's, against one snapshot of the configuration: refused
    // here, and bound (provider and model filled) inside the write below.
    let config = engine.runners().current();
    check_config(&profile, &config).map_err(EngineError::Invalid)?;
    let _writer = engine.writer().await;
    let written = engine
        .store()
        .update_profile(id, expected, move |current| {
            let mut next = profile.into_profile(
                current.id.clone(),
                current.revision.saturating_add(1),
                current.created_at,
                now,
            );
            // Cannot fail: the same targets passed against the same configuration above.
            let _ = bind_runners(&mut next.targets, &config);
            next
        })
        .await?;
    match written {
        ProfileUpdate::Written(p) => Ok(p),
        ProfileUpdate::NotFound => Err(EngineError::ProfileNotFound(id.to_owned())),
        ProfileUpdate::StaleRevision { current, expected } => Err(EngineError::Conflict(format!(
            "the profile changed meanwhile (revision {current} is current, the edit was based on {expected}); reload it"
        ))),
    }
}

pub async fn delete(engine: &Engine, id: &str) -> Result<(), EngineError> {
    let _writer = engine.writer().await;
    match engine.store().delete_profile(id).await? {
        ProfileDelete::Deleted => Ok(()),
        ProfileDelete::NotFound => Err(EngineError::ProfileNotFound(id.to_owned())),
        ProfileDelete::InUse { routes } => {
            let routes = if routes == 1 {
                "1 route".to_owned()
            } else {
                format!("{routes} routes")
            };
            Err(EngineError::Conflict(format!(
                "the profile has {routes}; it is kept so their history stays readable"
            )))
        }
    }
}
