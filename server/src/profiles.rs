//! Profile writes: validation (the policy crate's, plus the targets and the name) and CRUD.
//! A profile edit writes a new revision; routes read the current one at their next decision,
//! so pending timers and history are never touched by an edit.

use crate::{
    engine::{Engine, EngineError},
    store::{self, new_id},
};
use policy::{
    api::{CandidateTarget, DispatcherKind, Profile, ProfileInput, ProfileSummary},
    document::{FieldError, ValidationCode, ValidationError, ValidationErrors},
    legacy::{normalize, DocumentOrigin},
};

/// Longest profile name, in characters.
pub const MAX_NAME_CHARS: usize = 120;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2000;

/// Why a profile write failed.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("[PF1001] invalid profile")]
    Invalid(ValidationErrors),
    #[error("[PF1002] no profile `{0}`")]
    NotFound(String),
    #[error("[PF1003] {0}")]
    Conflict(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<sqlx::Error> for ProfileError {
    fn from(e: sqlx::Error) -> Self {
        ProfileError::Engine(EngineError::Storage(e))
    }
}

impl From<store::StoreError> for ProfileError {
    fn from(e: store::StoreError) -> Self {
        ProfileError::Engine(e.into())
    }
}

/// Validates a profile input: every problem at once, policy problems at the document's own
/// paths, others at `name`, `description`, `targets[i].<field>`.
pub fn validate(
    input: &ProfileInput,
) -> Result<(policy::wire::PolicyDocument, bool, Vec<CandidateTarget>), ValidationErrors> {
    let mut errors = Vec::new();
    let name = input.name.trim();
    if name.is_empty() {
        errors.push(FieldError::new(ValidationCode::Empty, "Give the profile a name.").at("name"));
    } else if name.chars().count() > MAX_NAME_CHARS {
        errors.push(
            FieldError::new(
                ValidationCode::TooLong,
                format!("Use at most {MAX_NAME_CHARS} characters."),
            )
            .at("name"),
        );
    }
    if input
        .description
        .as_deref()
        .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS)
    {
        errors.push(
            FieldError::new(
                ValidationCode::TooLong,
                format!("Use at most {MAX_DESCRIPTION_CHARS} characters."),
            )
            .at("description"),
        );
    }
    let normalized = match normalize(&input.policy) {
        Ok(n) => Some(n),
        Err(e) => {
            errors.extend(e.errors);
            None
        }
    };
    let mut targets = input.targets.clone();
    if let Some(n) = &normalized {
        let ids: Vec<&str> = n.document.candidates().iter().map(|c| c.id()).collect();
        if targets.is_empty() {
            targets = ids
                .iter()
                .map(|id| CandidateTarget {
                    id: (*id).to_owned(),
                    dispatcher: DispatcherKind::External,
                    provider_id: None,
                    model_id: None,
                    label: None,
                    script: Vec::new(),
                })
                .collect();
        } else {
            for (i, t) in targets.iter().enumerate() {
                match ids.get(i) {
                    Some(id) if *id == t.id => {}
                    Some(id) => errors.push(ValidationError {
                        path: format!("targets[{i}].id"),
                        code: ValidationCode::Missing,
                        message: format!(
                            "The policy's candidate {} is `{id}`; list targets with the same ids in the same order.",
                            i + 1
                        ),
                    }),
                    None => errors.push(ValidationError {
                        path: format!("targets[{i}].id"),
                        code: ValidationCode::UnknownField,
                        message: format!("The policy has no candidate `{}`; add it or remove this target.", t.id),
                    }),
                }
                for (field, value) in [("provider_id", &t.provider_id), ("model_id", &t.model_id)] {
                    if let Some(v) = value {
                        if let Err(e) = policy::document::validate_candidate_id(v) {
                            errors.push(e.at(&format!("targets[{i}].{field}")));
                        }
                    }
                }
            }
            for (i, id) in ids.iter().enumerate().skip(targets.len()) {
                errors.push(ValidationError {
                    path: format!("targets[{i}]"),
                    code: ValidationCode::Missing,
                    message: format!("Candidate `{id}` needs a target (how to reach it)."),
                });
            }
        }
    }
    match (errors.is_empty(), normalized) {
        (true, Some(n)) => Ok((n.document.to_wire(), n.origin == DocumentOrigin::Legacy, targets)),
        _ => Err(ValidationErrors { errors }),
    }
}

pub async fn list(engine: &Engine) -> Result<Vec<ProfileSummary>, ProfileError> {
    let mut conn = engine.pool().acquire().await?;
    Ok(store::list_profiles(&mut conn).await?)
}

pub async fn get(engine: &Engine, id: &str) -> Result<Profile, ProfileError> {
    let mut conn = engine.pool().acquire().await?;
    store::load_profile(&mut conn, id)
        .await?
        .map(|r| r.profile)
        .ok_or_else(|| ProfileError::NotFound(id.to_owned()))
}

pub async fn create(engine: &Engine, input: ProfileInput) -> Result<Profile, ProfileError> {
    insert_new(engine, new_id("pf", engine.now()), &input).await
}

/// Creates or replaces a profile with a chosen id (the demo seeds stable ids).
pub async fn put(engine: &Engine, id: &str, input: ProfileInput) -> Result<Profile, ProfileError> {
    match update(engine, id, input.clone()).await {
        Err(ProfileError::NotFound(_)) => insert_new(engine, id.to_owned(), &input).await,
        other => other,
    }
}

/// Validates `input` and stores it as revision 1 of a new profile `id`.
async fn insert_new(engine: &Engine, id: String, input: &ProfileInput) -> Result<Profile, ProfileError> {
    let (policy, legacy, targets) = validate(input).map_err(ProfileError::Invalid)?;
    let now = engine.now();
    let profile = Profile {
        id,
        name: input.name.trim().to_owned(),
        description: input.description.clone(),
        revision: 1,
        targets,
        policy,
        normalized_from_legacy: legacy,
        created_at: now,
        updated_at: now,
    };
    let _writer = engine.writer().await;
    let mut tx = engine.pool().begin().await?;
    store::upsert_profile(&mut tx, &profile).await?;
    tx.commit().await?;
    Ok(profile)
}

pub async fn update(engine: &Engine, id: &str, input: ProfileInput) -> Result<Profile, ProfileError> {
    let (policy, legacy, targets) = validate(&input).map_err(ProfileError::Invalid)?;
    let now = engine.now();
    let _writer = engine.writer().await;
    let mut tx = engine.pool().begin().await?;
    let current = store::load_profile(&mut tx, id)
        .await?
        .ok_or_else(|| ProfileError::NotFound(id.to_owned()))?
        .profile;
    if let Some(expected) = input.expected_revision {
        if expected != current.revision {
            return Err(ProfileError::Conflict(format!(
                "the profile changed meanwhile (revision {} is current, the edit was based on {expected}); reload it",
                current.revision
            )));
        }
    }
    let profile = Profile {
        id: id.to_owned(),
        name: input.name.trim().to_owned(),
        description: input.description,
        revision: current.revision.saturating_add(1),
        targets,
        policy,
        normalized_from_legacy: legacy,
        created_at: current.created_at,
        updated_at: now,
    };
    store::upsert_profile(&mut tx, &profile).await?;
    tx.commit().await?;
    Ok(profile)
}

pub async fn delete(engine: &Engine, id: &str) -> Result<(), ProfileError> {
    let _writer = engine.writer().await;
    let mut tx = engine.pool().begin().await?;
    let routes: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM routes WHERE profile_id = ?")
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
    if routes > 0 {
        let routes = if routes == 1 {
            "1 route".to_owned()
        } else {
            format!("{routes} routes")
        };
        return Err(ProfileError::Conflict(format!(
            "the profile has {routes}; it is kept so their history stays readable"
        )));
    }
    let done = sqlx::query("DELETE FROM profiles WHERE id = ?")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 0 {
        return Err(ProfileError::NotFound(id.to_owned()));
    }
    tx.commit().await?;
    Ok(())
}
