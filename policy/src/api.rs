//! REST and server-function data types for profiles and routes: what a caller sends to start
//! routed work, what the profile CRUD takes and returns, and the route list and detail views.
//! Pure data; the server validates.
//!
//! Why they live in `policy`: the REST API (`server`), the server functions and pages (`app`)
//! and the browser (WASM) read and write exactly these shapes, and `policy` is the one crate
//! all of them share. They carry no behaviour beyond small, total helpers.
//!
//! Shapes in one place:
//! - A profile is a name, an ordered list of [`CandidateTarget`]s (how to reach each candidate:
//!   dispatcher kind, provider and model ids, a simulated script) and a versioned policy
//!   document whose candidate ids are the targets' ids, in the same order. On write the
//!   document may be legacy ([`crate::legacy`]); the server always answers with version 1.
//! - A route is one logical dynamic session for one caller ([`Caller`]); its authoritative view
//!   is [`crate::wire::RouteSnapshot`], its history a list of [`HistoryEntry`] rows that are
//!   never rewritten, its dispatches a list of [`DispatchRecord`]s.

use crate::{
    classification::{Classification, Gate},
    evaluator::Decision,
    notify::NotificationRule,
    route::{AttemptKind, EventKind, ManualAction, StateName},
    wire::{PolicyDocument, RouteSnapshot},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

// ------------------------------------------------------------------------------------------------
// Profiles
// ------------------------------------------------------------------------------------------------

/// How a candidate's work is dispatched. Stable spellings (stored in the database).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DispatcherKind {
    /// The built-in scripted provider (demo and tests).
    Simulated,
    /// An Agent Client Protocol agent process started by Recourse.
    Acp,
    /// A one-shot LLM HTTP call.
    Http,
    /// Another system runs the agent and reports back over the API.
    External,
}

impl DispatcherKind {
    pub const ALL: [DispatcherKind; 4] = [
        DispatcherKind::Simulated,
        DispatcherKind::Acp,
        DispatcherKind::Http,
        DispatcherKind::External,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DispatcherKind::Simulated => "simulated",
            DispatcherKind::Acp => "acp",
            DispatcherKind::Http => "http",
            DispatcherKind::External => "external",
        }
    }

    pub fn parse(s: &str) -> Option<DispatcherKind> {
        DispatcherKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for DispatcherKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a simulated attempt does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SimulatedOutcome {
    /// Report the step's evidence envelope as a failure.
    Fail,
    /// Report success.
    Succeed,
    /// Never report anything (a person or a timeout must intervene).
    Hang,
}

/// One step of a simulated candidate's script. Attempt `n` on the candidate (1-based, counted
/// per route) plays step `n`; attempts past the end repeat the last step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SimulatedStep {
    pub outcome: SimulatedOutcome,
    /// Seconds between the launch and the report (0: at once).
    #[serde(default, deserialize_with = "crate::whole::u64")]
    pub after_seconds: u64,
    /// The evidence envelope (design contract 1) reported for `fail`. The server fills in the
    /// invocation identity and timestamps. Kept as the JSON it was given (checked against
    /// [`crate::envelope::EvidenceEnvelope`] on write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::envelope::EvidenceEnvelope>))]
    pub envelope: Option<Value>,
}

/// How to reach one candidate. `id` must equal the policy document's candidate id at the same
/// position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CandidateTarget {
    pub id: String,
    pub dispatcher: DispatcherKind,
    /// Safe provider identifier (e.g. `anthropic`); circuits key on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// Safe model identifier (e.g. `claude-sonnet-4-5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// A readable label for the UI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The agent (`acp`) or endpoint (`http`) of the server's configuration file that runs this
    /// candidate, by id. Required for those two dispatchers, absent for the others: what may
    /// start a process or spend money is configured on the server, never in a profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The script of a `simulated` candidate (ignored by other dispatchers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub script: Vec<SimulatedStep>,
}

/// What a profile is for. Stable spellings (stored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProfileKind {
    /// An ordered list of candidates; failures may move the route to the next one.
    #[default]
    Dynamic,
    /// One agent, used interactively: exactly one candidate. Its failures are classified and
    /// timed exactly as a dynamic profile's; only its defaults differ (a person is at hand, so
    /// recovery ends with a stop, not a switch): see `policy::limits::CONCRETE_*`.
    Concrete,
}

impl ProfileKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            ProfileKind::Dynamic => "dynamic",
            ProfileKind::Concrete => "concrete",
        }
    }

    pub fn parse(s: &str) -> Option<ProfileKind> {
        [ProfileKind::Dynamic, ProfileKind::Concrete]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// One agent (`acp`) or endpoint (`http`) of the server's configuration file, as the profile
/// editor offers it: a [`CandidateTarget::runner`] names it by `id`. Identifiers and a label
/// only; the command, arguments, folders, environment variable names and URLs stay on the
/// server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerOption {
    /// `acp` for an agent, `http` for an endpoint.
    pub kind: DispatcherKind,
    pub id: String,
    /// The operator's readable name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The provider and model it runs, when the configuration names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

/// What profile create and update take. `policy` is a version-1 document or a legacy shape
/// (normalized on write); it is JSON on purpose so that every problem comes back with a path.
/// Paths of policy problems are the document's own (`candidates[1].hard.retry.max_retries`);
/// the other fields' are `name`, `description` and `targets[i].<field>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProfileInput {
    pub name: String,
    /// `dynamic` (the default) or `concrete` (one agent, interactive defaults).
    #[serde(default, skip_serializing_if = "is_dynamic")]
    pub kind: ProfileKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// One target per policy candidate, same ids, same order. Empty: every candidate gets an
    /// `external` target.
    #[serde(default)]
    pub targets: Vec<CandidateTarget>,
    /// The policy document. A `concrete` profile may leave it out: its one candidate then gets
    /// the interactive defaults.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub policy: Value,
    /// For updates: the revision the edit was based on; a different current revision is a
    /// conflict. `None` overwrites.
    #[serde(
        default,
        deserialize_with = "crate::whole::option_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_revision: Option<u64>,
    /// Who is told what (`crate::notify`): rules of events and channels. Absent: nobody.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<NotificationRule>,
}

/// A stored profile, with its normalized version-1 policy document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Profile {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "is_dynamic")]
    pub kind: ProfileKind,
    pub description: Option<String>,
    /// Increments on every update; history rows record the revision they used.
    pub revision: u64,
    pub targets: Vec<CandidateTarget>,
    pub policy: PolicyDocument,
    /// Whether the last write arrived in a legacy shape and was normalized.
    pub normalized_from_legacy: bool,
    /// Who is told what when this profile's routes need it (normalized; empty: nobody).
    #[serde(default)]
    pub notifications: Vec<NotificationRule>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Profile {
    /// The target of the candidate `candidate_id`, if the profile has one for it.
    pub fn target(&self, candidate_id: &str) -> Option<&CandidateTarget> {
        self.targets.iter().find(|t| t.id == candidate_id)
    }
}

fn is_dynamic(kind: &ProfileKind) -> bool {
    *kind == ProfileKind::Dynamic
}

/// A profile in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProfileSummary {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub revision: u64,
    /// Candidate ids in preference order.
    pub candidate_ids: Vec<String>,
    /// Routes on this profile that are not completed or abandoned.
    pub open_routes: u64,
    /// All routes on this profile, finished ones included. A profile with any is kept (not
    /// deleted) so their history stays readable.
    pub routes: u64,
    pub updated_at: DateTime<Utc>,
}

// ------------------------------------------------------------------------------------------------
// Routes
// ------------------------------------------------------------------------------------------------

/// Who started routed work. Stable spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CallerKind {
    KanbanTask,
    Workflow,
    Utility,
    Office,
    /// An editor session through `recourse acp`, which runs the route's attempts itself, where
    /// the editor's files are: each attempt is leased to it (a claim limited to the route), and
    /// the server starts nothing for such a route.
    Editor,
}

impl CallerKind {
    pub const ALL: [CallerKind; 5] = [
        CallerKind::KanbanTask,
        CallerKind::Workflow,
        CallerKind::Utility,
        CallerKind::Office,
        CallerKind::Editor,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            CallerKind::KanbanTask => "kanban_task",
            CallerKind::Workflow => "workflow",
            CallerKind::Utility => "utility",
            CallerKind::Office => "office",
            CallerKind::Editor => "editor",
        }
    }

    /// Whether the caller runs the route's attempts itself (`editor`): each attempt is leased
    /// to it through the lease protocol, whatever its candidate's dispatcher, and never started
    /// by the server.
    pub const fn runs_attempts(self) -> bool {
        matches!(self, CallerKind::Editor)
    }

    pub fn parse(s: &str) -> Option<CallerKind> {
        CallerKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for CallerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The caller and its invocation identity: `reference` names the caller's object (task id,
/// workflow step, Office assignment, utility call site) and `invocation_id` the one routed
/// invocation (unique per route; a utility call must give a fresh one each time).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Caller {
    pub kind: CallerKind,
    pub reference: String,
    pub invocation_id: String,
}

/// `POST /api/v1/routes`: start routed work on a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartRouteRequest {
    pub profile_id: String,
    pub caller: Caller,
    /// A short, caller-chosen title for the UI (no prompt text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The work itself, for candidates Recourse runs (`acp`, `http`): stored durably, apart
    /// from evidence, and given to every attempt of the route's current prompt generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
    /// Pins the route to this candidate of the profile: no other is ever chosen, so the route
    /// never switches (an editor session's mode). Only for a caller that runs its attempts
    /// (`editor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<String>,
}

/// The work a route carries (design contract 7): what each kind of candidate needs to run it.
/// An `acp` candidate gets the prompt (ACP content blocks) in the working directory; an `http`
/// candidate gets the messages and parameters (its model and key come from the endpoint's
/// configuration). A switch to another candidate sends it the same current work on a new
/// session; earlier turns are not replayed unless the caller sends them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Work {
    /// For `acp` candidates: ACP content blocks, e.g. `[{"type": "text", "text": "Fix the build"}]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub prompt: Vec<Value>,
    /// For `acp` candidates: an absolute working directory under a root the agent's
    /// configuration allows (the agent's `default_cwd` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// For `http` candidates: the conversation, e.g. `[{"role": "user", "content": "Summarize ..."}]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub messages: Vec<Value>,
    /// For `http` candidates: request parameters such as `max_tokens` or `temperature` (not
    /// `model`, `stream` or anything the endpoint's configuration owns).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params: serde_json::Map<String, Value>,
}

/// `POST /api/v1/routes/{id}/work`: the next prompt of the same logical session (a new prompt
/// generation), fenced by `expected_generation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WorkRequest {
    /// The route generation the caller last saw; a stale one gets 409 and the snapshot.
    #[serde(deserialize_with = "crate::whole::u64")]
    pub expected_generation: u64,
    /// The new work; absent, the route's stored work is run again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
}

/// Filter for route lists; every field narrows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_kind: Option<CallerKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<StateName>,
    /// Only routes that are not finished (neither completed nor abandoned).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_id: Option<String>,
    /// At most this many (server default 100, maximum 1000), most recently changed first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// A route in a list: identity plus the authoritative snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteSummary {
    pub id: String,
    pub profile_id: String,
    pub profile_name: String,
    pub caller: Caller,
    pub title: Option<String>,
    pub snapshot: RouteSnapshot,
    /// The storage error of the latest transition that could not be written, if the route is
    /// stuck on one (the route did nothing after it).
    pub durable_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One accepted change of a route, as it was. Append-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryEntry {
    /// 1-based position in the route's history.
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub event: EventKind,
    pub from: Option<StateName>,
    pub to: StateName,
    /// The generation after the change.
    pub generation: u64,
    pub candidate_id: String,
    pub attempt: Option<u32>,
    /// The profile revision the decision read.
    pub profile_revision: u64,
    /// The decision with its policy snapshot, as it was.
    pub decision: Option<Decision>,
    /// The classification of the failure, as it was (bounded, redacted).
    pub classification: Option<Classification>,
}

/// Where a dispatch is. Stable spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DispatchStatus {
    /// Recorded, provably not started.
    Scheduled,
    /// Recorded as started before it started; may have had effects.
    Started,
    /// Its outcome is known.
    Settled,
}

/// How a dispatch ended. Stable spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DispatchOutcome {
    Succeeded,
    Failed,
    /// Aborted by a person, a stop or the route's end.
    Aborted,
    /// Never started (the route moved on first).
    Superseded,
    /// Started before a restart with no known outcome; never repeated.
    Ambiguous,
}

/// One attempt's dispatch record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DispatchRecord {
    pub attempt: u32,
    pub candidate_id: String,
    pub kind: AttemptKind,
    pub dispatcher: DispatcherKind,
    /// The route generation when scheduled.
    pub scheduled_generation: u64,
    /// The generation evidence and results of this attempt carry (set when started).
    pub invocation_generation: Option<u64>,
    pub status: DispatchStatus,
    pub outcome: Option<DispatchOutcome>,
    pub scheduled_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub settled_at: Option<DateTime<Utc>>,
}

/// A route with everything that happened to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteDetail {
    pub route: RouteSummary,
    /// Oldest first.
    pub history: Vec<HistoryEntry>,
    /// Oldest first.
    pub dispatches: Vec<DispatchRecord>,
}

/// `POST /api/v1/routes/{id}/actions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManualActionRequest {
    pub action: ManualAction,
    #[serde(deserialize_with = "crate::whole::u64")]
    pub expected_generation: u64,
}

/// The answer to a manual action: the authoritative snapshot either way. REST sends
/// `Applied` as 200 and `Conflict` as 409 with the snapshot as the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "snapshot", rename_all = "snake_case")]
pub enum ActionOutcome {
    /// The action committed (or was an idempotent repeat, e.g. a second cancel).
    Applied(RouteSnapshot),
    /// The expected generation was stale, or the action is not allowed now.
    Conflict(RouteSnapshot),
}

impl ActionOutcome {
    pub fn snapshot(&self) -> &RouteSnapshot {
        match self {
            ActionOutcome::Applied(s) | ActionOutcome::Conflict(s) => s,
        }
    }
}

/// `POST /api/v1/routes/{id}/evidence`: the response. The envelope itself is contract 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceOutcome {
    /// Whether the evidence changed the route (false when stale or not for the current
    /// invocation; the snapshot says where the route is).
    pub accepted: bool,
    pub classification: Classification,
    pub gate: Gate,
    pub snapshot: RouteSnapshot,
}

/// `POST /api/v1/routes/{id}/result`: the current invocation succeeded (external dispatchers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SuccessReport {
    #[serde(deserialize_with = "crate::whole::u64")]
    pub invocation_generation: u64,
}

// ------------------------------------------------------------------------------------------------
// External runners
// ------------------------------------------------------------------------------------------------

/// `POST /api/v1/dispatches/claim`: an external runner asks for the oldest started `external`
/// attempt nobody holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The runner's name (an identifier, for the UI and the log).
    pub runner: String,
    /// How long the claim holds before it must be acknowledged, in seconds (default 60).
    #[serde(
        default,
        deserialize_with = "crate::whole::option_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease_seconds: Option<u64>,
    /// The runner starts the work at once: the claim is also its acknowledgement (no `ack`
    /// call; from the answer on, the attempt may have run, and it must heartbeat).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acknowledge: bool,
}

/// A claimed attempt: what to run and the lease that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseGrant {
    pub route_id: String,
    pub attempt: u32,
    /// The caller's invocation id (evidence names it).
    pub invocation_id: String,
    /// The generation the attempt's evidence and report carry.
    pub invocation_generation: u64,
    pub candidate_id: String,
    /// The candidate's dispatcher (an `editor` route's `acp` candidates are run by the runner
    /// that claimed them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatcher: Option<DispatcherKind>,
    /// The agent (`acp`) or endpoint (`http`) of the configuration the candidate names, by id:
    /// a runner that starts it itself (`recourse acp`) finds it in its own configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// The route's work, if it carries any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
    pub lease_id: String,
    /// Until when the lease holds: acknowledge (or heartbeat) before then.
    pub lease_expires_at: DateTime<Utc>,
}

/// `POST /api/v1/dispatches/{route_id}/{attempt}/ack` and `.../heartbeat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseRenewal {
    pub lease_id: String,
    /// How much longer the lease holds, in seconds (default 60).
    #[serde(
        default,
        deserialize_with = "crate::whole::option_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease_seconds: Option<u64>,
}

/// A lease as it now stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseState {
    pub lease_id: String,
    pub lease_expires_at: DateTime<Utc>,
}

/// `POST /api/v1/dispatches/{route_id}/{attempt}/report`: what the leased attempt came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunnerReport {
    pub lease_id: String,
    pub outcome: RunnerOutcome,
    /// For `succeeded`: the attempt's result, kept as the route's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// For `failed`: the evidence envelope (contract 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::envelope::EvidenceEnvelope>))]
    pub envelope: Option<Value>,
}

/// How a leased attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunnerOutcome {
    Succeeded,
    Failed,
}

/// Circuit states. Stable spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    Closed,
    /// Candidates on this resource are ineligible until `open_until`.
    Open,
    /// Expired: one route holds the probe lease; the others wait for its outcome.
    Probing,
}

/// A shared resource circuit (provider, account or model).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CircuitView {
    /// `provider:<id>`, `account:<provider>` or `model:<provider>/<model>`.
    pub key: String,
    pub state: CircuitState,
    pub open_until: Option<DateTime<Utc>>,
    /// Consecutive classified failures that (re)opened it.
    pub failures: u32,
    pub code: Option<String>,
    pub probe_route_id: Option<String>,
}

/// A non-validation API error body: `{"error":{"code":"not_found","message":"..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiError {
    pub error: ApiErrorBody,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiErrorBody {
    /// Stable: `bad_request` (400), `foreign_origin` (403), `not_found` (404), `conflict`
    /// (409; `lease_lost` is its message's first word for external runners),
    /// `payload_too_large` (413), `unsupported_media_type` (415), `internal` (500),
    /// `storage_unavailable` and `stopping` (503).
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_spellings_round_trip() {
        for k in DispatcherKind::ALL {
            assert_eq!(DispatcherKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), Value::String(k.as_str().into()));
        }
        for k in CallerKind::ALL {
            assert_eq!(CallerKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), Value::String(k.as_str().into()));
        }
    }

    #[test]
    fn a_simulated_step_needs_only_its_outcome() {
        let s: SimulatedStep = serde_json::from_str(r#"{"outcome":"hang"}"#).unwrap();
        assert_eq!(s.outcome, SimulatedOutcome::Hang);
        assert_eq!(s.after_seconds, 0);
        assert!(s.envelope.is_none());
    }
}
