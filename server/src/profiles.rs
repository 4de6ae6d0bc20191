//! The profile service the REST API and the UI's backend share. Input arrives already parsed
//! (`policy::input::ValidatedProfile`, at each surface's boundary); a profile edit writes a
//! new revision, and routes read the current one at their next decision, so pending timers and
//! history are never touched.

use crate::{
    engine::{Engine, EngineError},
    store::{new_id, ProfileDelete, ProfileUpdate},
};
use policy::{
    api::{Profile, ProfileSummary},
    input::ValidatedProfile,
};

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
    let profile = profile.into_profile(id, 1, now, now);
    let _writer = engine.writer().await;
    engine.store().insert_profile(&profile).await?;
    Ok(profile)
}

pub async fn update(engine: &Engine, id: &str, profile: ValidatedProfile) -> Result<Profile, EngineError> {
    let now = engine.now();
    let expected = profile.expected_revision();
    let _writer = engine.writer().await;
    let written = engine
        .store()
        .update_profile(id, expected, move |current| {
            profile.into_profile(
                current.id.clone(),
                current.revision.saturating_add(1),
                current.created_at,
                now,
            )
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
