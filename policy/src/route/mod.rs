//! The dynamic route state machine: a transducer from (state, event, now) to (next state,
//! effects). It never performs an effect, never reads a clock and never does IO.
//!
//! # States
//!
//! The spec's six, plus two terminal ones:
//!
//! - `active`: on a candidate, healthy. Either idle (no attempt) or with one attempt
//!   scheduled (`pending`) or in flight (`started`).
//! - `waiting_for_reset`: a durable wait until a trusted reset; then one post-wait attempt.
//! - `retry_wait`: a durable wait before retry ordinal `k` of the same candidate.
//! - `retrying`: the post-wait, retry or manual attempt is scheduled or in flight.
//! - `switching`: the candidate was excluded for this cycle; the server is asked which
//!   candidates are eligible (circuits are its business) and answers with an event.
//! - `action_required`: automatic recovery stopped; a person decides (see [`ActionReason`]).
//! - `completed` (terminal): the caller reported the work finished.
//! - `abandoned` (terminal): the caller or a person ended the route without finishing.
//!
//! Why "stop" does not end the route: the spec's table sends cancel and stop to
//! `action_required`, where a person can still retry or skip. Ending the route is a separate,
//! explicit `abandon`.
//!
//! # The table
//!
//! `g` is the route's generation; every fenced event must carry it. Every accepted change
//! increments `g`. "=" means accepted with no change (no new generation, nothing to persist).
//!
//! ```text
//! state                 event                          next state           effects
//! --------------------  -----------------------------  -------------------  ----------------------------
//! completed             complete(g-1 | g)              = (idempotent)       -
//! abandoned             abandon(g-1 | g)               = (idempotent)       -
//! (any terminal)        restarted                      =                    -
//! (any terminal)        anything else                  rejected: StaleGeneration (gen != g) or NotAllowed
//! action_required       cancel_wait(g) | stop(g),      = (idempotent)       -
//!                         or the same request at g-1
//!                         that led here
//! (any)                 fenced event with gen != g     rejected: StaleGeneration
//! active(pending)       dispatch_started(g)            active(started)      Launch
//! retrying(pending)     dispatch_started(g)            retrying(started)    Launch
//!  | either, output     dispatch_started(g), not the   same, started        RefuseStart
//!    held (see held)      retry the session waits for
//! active(pending)       dispatch_held(g), new hold     same, held           ArmTimer (the hold's until)
//!  | retrying(pending)  dispatch_held(g), same hold    =                    -
//! active(started)       failed(g): wait applies        waiting_for_reset    ArmTimer
//!  | retrying(started)  failed(g): retry budget left   retry_wait           ArmTimer
//!                       failed(g): exhausted, skip     switching            EvaluateCandidates
//!                       failed(g): exhausted, stop     action_required      NotifyPerson
//!                       failed(g): unsafe, unclassified, action_required     NotifyPerson
//!                         stale, no usable policy
//! active(started)       lease_expired(g)               action_required      NotifyPerson
//!  | retrying(started)                                 (ambiguous_dispatch)
//! active(started)       succeeded(g)                   active(idle)*        -
//!  | retrying(started)
//! active(idle)          work_submitted(g)              active(pending)      BeginDispatch
//! active(idle)          complete(g)                    completed            RouteClosed
//! waiting_for_reset     deadline_reached(g), due       retrying(pending)    BeginDispatch
//! retry_wait            deadline_reached(g), due       retrying(pending)    BeginDispatch
//! waiting_for_reset     retry_now(g)                   retrying(pending)    CancelTimer, BeginDispatch
//!  | retry_wait         skip_now(g)                    switching            CancelTimer, EvaluateCandidates
//!                       cancel_wait(g)                 action_required      CancelTimer
//!                       stop(g)                        action_required      CancelTimer
//! switching             candidates_evaluated(g): one   active(pending)      BeginDispatch
//!                         eligible now or later
//!                       candidates_evaluated(g): none  action_required      NotifyPerson
//!                         can ever be
//! action_required       retry_now(g)                   retrying(pending)*   BeginDispatch
//! action_required       skip_now(g)                    switching*           EvaluateCandidates
//! active | retrying     stop(g)                        action_required      AbortDispatch if started
//!  | switching
//! (any non-terminal)    abandon(g)                     abandoned            [CancelTimer], [AbortDispatch],
//!                                                                           RouteClosed
//! active | retrying     restarted, attempt pending     = (undispatched)     BeginDispatch
//! active | retrying     restarted, attempt started     action_required      NotifyPerson
//!                                                      (ambiguous_dispatch)
//! waiting_for_reset     restarted                      =                    ArmTimer (re-arm)
//!  | retry_wait
//! switching             restarted                      =                    EvaluateCandidates
//! (anything else)       (anything else)                rejected: NotAllowed
//! ```
//!
//! `*` starts a new route cycle. A "due" deadline is one at or before `now`; an early timer is
//! rejected with `DeadlineNotReached` so the server re-arms it.
//!
//! Why a finished route refuses instead of absorbing: a caller that sends `complete` or a
//! manual action with an old generation must learn that its view is stale (HTTP 409 with the
//! snapshot), not be told "done". Only a repeat of the very request that finished the route
//! (a retried HTTP call) is answered as done.
//!
//! # Dispatch, in two steps
//!
//! A dispatch is recorded as started before it starts. `BeginDispatch { generation }` means "an
//! attempt is scheduled and provably has not started": the server submits
//! `DispatchStarted { generation }`, commits the result, and only then performs `Launch`, whose
//! `invocation_generation` is the generation evidence and results must carry. After a crash, a
//! `pending` attempt is safe to begin again; a `started` one may have run, so `Restarted` turns
//! it into `action_required` with reason `ambiguous_dispatch` and it is never repeated.
//!
//! # Route cycles
//!
//! A cycle is one effort to get the current unit of work served. It holds the candidates
//! excluded by `skip` and, per candidate and class, the retries used and whether reset waiting
//! was used (at most once per cycle). A new cycle starts when an attempt succeeds and when a
//! person retries or skips from `action_required`. When switching finds no eligible candidate
//! outside the exclusions, now or ever, the route goes to `action_required` with
//! `no_eligible_candidate`. Candidates are tried in the profile's preference order: the first
//! eligible now that is not excluded wins; when none is, the one eligible soonest (behind an
//! open circuit) is chosen and its attempt is parked by the dispatch gate (`dispatch_held`),
//! with the circuit and the instant in the snapshot, instead of bothering a person.
//!
//! # Persist, then act
//!
//! A [`Transition`] is what to commit (`next`, with `decision` for the history row) and what to
//! do after the commit succeeds (`effects`, in order). If the commit fails, the server performs
//! none of the effects. Timers fire `DeadlineReached { generation }` with the generation they
//! were armed for; a late timer is stale and rejected, so a missed `CancelTimer` is harmless.

mod held;
mod step;

pub use held::{HeldOutput, HeldSession, LaunchFacts, ResumeOffer};
pub use step::{start, step};

use crate::{
    classification::{Classification, Gate},
    document::ValidatedCandidatePolicy,
    evaluator::{CandidateUsage, Decision},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
};

// ------------------------------------------------------------------------------------------------
// State
// ------------------------------------------------------------------------------------------------

/// The persisted state of one route. Serializes losslessly (the server stores it as JSON next
/// to the columns it indexes: generation, state name, deadline). Fields are private; read them
/// through the accessors, change them only through [`step`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteState {
    generation: u64,
    candidate: CandidateRef,
    cycle: RouteCycle,
    /// Attempts scheduled on this route so far; attempt numbers are 1-based.
    attempts: u32,
    status: RouteStatus,
    /// The latest policy decision (pending while waiting, retrying, switching or stopped);
    /// cleared by a success.
    decision: Option<Decision>,
    /// The circuit the pending attempt is parked behind, if any. Only a `dispatch_held` step
    /// sets it; every other change clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hold: Option<Hold>,
    /// The route's output an agent session holds, for the retry that resumes it (see
    /// [`held`]); in force until the route cycle ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held: Option<HeldOutput>,
}

/// The candidate a route is on: its id and its position in the profile when it was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CandidateRef {
    pub id: String,
    pub index: u32,
}

/// Per-cycle bookkeeping (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteCycle {
    number: u32,
    excluded: BTreeSet<String>,
    usage: BTreeMap<String, CandidateUsage>,
}

impl RouteCycle {
    /// 1-based cycle number.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Candidates excluded by `skip` in this cycle, sorted.
    pub fn excluded(&self) -> impl Iterator<Item = &str> + '_ {
        self.excluded.iter().map(String::as_str)
    }

    pub fn is_excluded(&self, candidate_id: &str) -> bool {
        self.excluded.contains(candidate_id)
    }

    /// What a candidate has used in this cycle (zeros when nothing).
    pub fn usage(&self, candidate_id: &str) -> CandidateUsage {
        self.usage.get(candidate_id).copied().unwrap_or_default()
    }

    /// Every candidate with usage in this cycle.
    pub fn all_usage(&self) -> impl Iterator<Item = (&str, CandidateUsage)> + '_ {
        self.usage.iter().map(|(k, v)| (k.as_str(), *v))
    }

    fn next(&self) -> RouteCycle {
        RouteCycle {
            number: self.number.saturating_add(1),
            excluded: BTreeSet::new(),
            usage: BTreeMap::new(),
        }
    }
}

/// The state and the data that only exists in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RouteStatus {
    Active { attempt: Option<Attempt> },
    WaitingForReset { deadline: DateTime<Utc> },
    RetryWait { deadline: DateTime<Utc> },
    Retrying { attempt: Attempt },
    Switching,
    ActionRequired { reason: ActionReason },
    Completed,
    Abandoned,
}

impl RouteStatus {
    pub fn name(&self) -> StateName {
        match self {
            RouteStatus::Active { .. } => StateName::Active,
            RouteStatus::WaitingForReset { .. } => StateName::WaitingForReset,
            RouteStatus::RetryWait { .. } => StateName::RetryWait,
            RouteStatus::Retrying { .. } => StateName::Retrying,
            RouteStatus::Switching => StateName::Switching,
            RouteStatus::ActionRequired { .. } => StateName::ActionRequired,
            RouteStatus::Completed => StateName::Completed,
            RouteStatus::Abandoned => StateName::Abandoned,
        }
    }
}

/// State names: the persisted and wire spelling (index it; never rename one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StateName {
    Active,
    WaitingForReset,
    RetryWait,
    Retrying,
    Switching,
    ActionRequired,
    Completed,
    Abandoned,
}

impl StateName {
    pub const ALL: [StateName; 8] = [
        StateName::Active,
        StateName::WaitingForReset,
        StateName::RetryWait,
        StateName::Retrying,
        StateName::Switching,
        StateName::ActionRequired,
        StateName::Completed,
        StateName::Abandoned,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            StateName::Active => "active",
            StateName::WaitingForReset => "waiting_for_reset",
            StateName::RetryWait => "retry_wait",
            StateName::Retrying => "retrying",
            StateName::Switching => "switching",
            StateName::ActionRequired => "action_required",
            StateName::Completed => "completed",
            StateName::Abandoned => "abandoned",
        }
    }

    pub fn parse(s: &str) -> Option<StateName> {
        StateName::ALL.into_iter().find(|n| n.as_str() == s)
    }

    pub const fn is_terminal(self) -> bool {
        matches!(self, StateName::Completed | StateName::Abandoned)
    }
}

impl fmt::Display for StateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attempt on the route's current candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attempt {
    /// 1-based, unique within the route.
    pub number: u32,
    pub kind: AttemptKind,
    pub dispatch: DispatchState,
}

/// Why an attempt exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    /// The route's first attempt, or new work submitted on a healthy route.
    Initial,
    /// A retry of the same candidate after `retry_wait`.
    Retry,
    /// The one attempt after a reset wait.
    PostWait,
    /// The first attempt on a candidate chosen by switching.
    Switch,
    /// A person's retry from `action_required`.
    Manual,
}

/// Whether the attempt may have reached the agent or provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DispatchState {
    /// Scheduled; provably not started.
    Pending,
    /// Recorded as started; from now on it may have had effects.
    Started,
}

/// Why a person is needed. Stable spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActionReason {
    /// The class policy ended in `on_exhausted = stop`.
    PolicyStop,
    StaleEvidence,
    Unclassified,
    InconsistentClassification,
    /// The effect-safety gate denied automatic recovery (tool activity, output, ...).
    EffectUnsafe,
    /// The candidate had no usable policy.
    ConfigurationError,
    /// Switching found no eligible candidate outside this cycle's exclusions.
    NoEligibleCandidate,
    /// A person cancelled the pending wait.
    WaitCancelled,
    /// A person stopped automatic work.
    StoppedByUser,
    /// After a restart, an attempt may have started and has no settled outcome.
    AmbiguousDispatch,
}

impl ActionReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            ActionReason::PolicyStop => "policy_stop",
            ActionReason::StaleEvidence => "stale_evidence",
            ActionReason::Unclassified => "unclassified",
            ActionReason::InconsistentClassification => "inconsistent_classification",
            ActionReason::EffectUnsafe => "effect_unsafe",
            ActionReason::ConfigurationError => "configuration_error",
            ActionReason::NoEligibleCandidate => "no_eligible_candidate",
            ActionReason::WaitCancelled => "wait_cancelled",
            ActionReason::StoppedByUser => "stopped_by_user",
            ActionReason::AmbiguousDispatch => "ambiguous_dispatch",
        }
    }
}

impl fmt::Display for ActionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RouteState {
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn state_name(&self) -> StateName {
        self.status.name()
    }

    pub fn status(&self) -> &RouteStatus {
        &self.status
    }

    pub fn candidate(&self) -> &CandidateRef {
        &self.candidate
    }

    pub fn cycle(&self) -> &RouteCycle {
        &self.cycle
    }

    /// Attempts scheduled on this route so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The current attempt, scheduled or in flight.
    pub fn attempt(&self) -> Option<Attempt> {
        match &self.status {
            RouteStatus::Active { attempt } => *attempt,
            RouteStatus::Retrying { attempt } => Some(*attempt),
            _ => None,
        }
    }

    /// The durable deadline of a pending wait or retry.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        match &self.status {
            RouteStatus::WaitingForReset { deadline } | RouteStatus::RetryWait { deadline } => {
                Some(*deadline)
            }
            _ => None,
        }
    }

    /// The circuit the pending attempt waits behind, and until when.
    pub fn hold(&self) -> Option<&Hold> {
        self.hold.as_ref()
    }

    /// The output an agent session holds for this route cycle's retry, if any (see [`held`]).
    pub fn held(&self) -> Option<&HeldOutput> {
        self.held.as_ref()
    }

    /// The latest policy decision: code, class, catalogue version, policy snapshot, retry
    /// ordinal and maximum, pending outcome.
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    pub fn action_reason(&self) -> Option<ActionReason> {
        match &self.status {
            RouteStatus::ActionRequired { reason } => Some(*reason),
            _ => None,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.state_name().is_terminal()
    }

    /// Whether an attempt is recorded as started and unsettled (ambiguous after a restart).
    pub fn has_started_dispatch(&self) -> bool {
        self.attempt()
            .is_some_and(|a| a.dispatch == DispatchState::Started)
    }

    /// The manual actions that would change this route now (what the UI offers).
    pub fn allowed_actions(&self) -> Vec<ManualAction> {
        use ManualAction::*;
        match &self.status {
            RouteStatus::WaitingForReset { .. } | RouteStatus::RetryWait { .. } => {
                vec![RetryNow, SkipNow, CancelWait, Stop]
            }
            RouteStatus::ActionRequired { .. } => vec![RetryNow, SkipNow],
            RouteStatus::Active { .. } | RouteStatus::Retrying { .. } | RouteStatus::Switching => vec![Stop],
            RouteStatus::Completed | RouteStatus::Abandoned => vec![],
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Events
// ------------------------------------------------------------------------------------------------

/// A person's action on a route (REST: `{"action": "retry_now", "expected_generation": 7}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ManualAction {
    RetryNow,
    SkipNow,
    CancelWait,
    Stop,
}

impl ManualAction {
    pub const ALL: [ManualAction; 4] = [
        ManualAction::RetryNow,
        ManualAction::SkipNow,
        ManualAction::CancelWait,
        ManualAction::Stop,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ManualAction::RetryNow => "retry_now",
            ManualAction::SkipNow => "skip_now",
            ManualAction::CancelWait => "cancel_wait",
            ManualAction::Stop => "stop",
        }
    }
}

/// One candidate of the profile, in preference order, with the server's eligibility verdict
/// (from resource circuits, probe leases, configuration).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CandidateOption {
    pub id: String,
    pub eligibility: Eligibility,
}

impl CandidateOption {
    /// A candidate that may take an attempt now.
    pub fn now(id: &str) -> CandidateOption {
        CandidateOption {
            id: id.to_owned(),
            eligibility: Eligibility::Now,
        }
    }

    /// A candidate behind a resource circuit until `at`.
    pub fn at(id: &str, at: DateTime<Utc>) -> CandidateOption {
        CandidateOption {
            id: id.to_owned(),
            eligibility: Eligibility::At(at),
        }
    }

    /// A candidate that cannot take work however long the route waits.
    pub fn never(id: &str) -> CandidateOption {
        CandidateOption {
            id: id.to_owned(),
            eligibility: Eligibility::Never,
        }
    }
}

/// Whether, and from when, a candidate can take an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "eligible", content = "at", rename_all = "snake_case")]
pub enum Eligibility {
    /// Now (its circuits are closed, or expired and free to probe).
    Now,
    /// Not before this instant: an open circuit, or another route's probe, holds it.
    At(DateTime<Utc>),
    /// Not in this configuration (nothing will make it eligible by waiting).
    Never,
}

/// A pending attempt parked behind a resource circuit: the dispatch gate looks again at
/// `until` (or earlier, when the circuit closes or its probe ends).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Hold {
    /// The circuit key (`provider:<id>`, `account:<provider>`, `model:<provider>/<model>`).
    pub circuit: String,
    pub until: DateTime<Utc>,
}

/// A classified failure of the route's current attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReport {
    /// The invocation generation the evidence belongs to (from `Launch`).
    pub evidence_generation: u64,
    pub classification: Classification,
    pub gate: Gate,
    /// The current candidate's policy from the profile as it is now (profile edits affect the
    /// next decision), or `None` when it cannot be loaded: then no work is authorized.
    pub policy: Option<ValidatedCandidatePolicy>,
    /// The session that still holds the attempt's output, offered for the gate's one exception
    /// (see [`held`]).
    pub resume: Option<ResumeOffer>,
}

/// Everything that can happen to a route. Every event but `Restarted` carries the generation it
/// was issued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteEvent {
    /// The server is about to start the pending attempt (answer to `BeginDispatch`); while the
    /// route holds output, with what the attempt would run on (see [`held`]).
    DispatchStarted {
        generation: u64,
        launch: Option<LaunchFacts>,
    },
    /// The dispatch gate parked the pending attempt behind an open circuit (answer to
    /// `BeginDispatch`); it looks again at `hold.until`.
    DispatchHeld { generation: u64, hold: Hold },
    /// The current attempt failed, classified (boxed: it is much larger than the others).
    Failed(Box<FailureReport>),
    /// The current attempt succeeded.
    Succeeded { generation: u64 },
    /// The lease of an external runner that acknowledged the current attempt ran out without a
    /// report: the attempt may have run, so it is ambiguous.
    LeaseExpired { generation: u64 },
    /// The durable timer armed for `generation` fired.
    DeadlineReached { generation: u64 },
    /// Eligibility of the profile's candidates (answer to `EvaluateCandidates`).
    CandidatesEvaluated {
        expected_generation: u64,
        candidates: Vec<CandidateOption>,
    },
    /// The caller has more work for the route's candidate (e.g. the next prompt).
    WorkSubmitted { expected_generation: u64 },
    /// A person's action.
    Manual {
        action: ManualAction,
        expected_generation: u64,
    },
    /// The caller's work is finished.
    Complete { expected_generation: u64 },
    /// The caller or a person ends the route without finishing.
    Abandon { expected_generation: u64 },
    /// The server restarted: reconcile this route (applied once per route at boot).
    Restarted,
}

/// Event names, for history rows, logs and event payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Started,
    DispatchStarted,
    DispatchHeld,
    LeaseExpired,
    Failed,
    Succeeded,
    DeadlineReached,
    CandidatesEvaluated,
    WorkSubmitted,
    RetryNow,
    SkipNow,
    CancelWait,
    Stop,
    Complete,
    Abandon,
    Restarted,
}

impl EventKind {
    /// Whether a change this event makes to a route with a started attempt aborts that attempt
    /// ([`RouteEffect::AbortDispatch`]): a person's stop, or the route abandoned. A replica
    /// that learns of such a change from the event log, not from its own commit, stops the
    /// attempt it runs by this (the table test holds it equal to the transition function).
    pub const fn aborts_started_attempt(self) -> bool {
        matches!(self, EventKind::Stop | EventKind::Abandon)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::DispatchStarted => "dispatch_started",
            EventKind::DispatchHeld => "dispatch_held",
            EventKind::LeaseExpired => "lease_expired",
            EventKind::Failed => "failed",
            EventKind::Succeeded => "succeeded",
            EventKind::DeadlineReached => "deadline_reached",
            EventKind::CandidatesEvaluated => "candidates_evaluated",
            EventKind::WorkSubmitted => "work_submitted",
            EventKind::RetryNow => "retry_now",
            EventKind::SkipNow => "skip_now",
            EventKind::CancelWait => "cancel_wait",
            EventKind::Stop => "stop",
            EventKind::Complete => "complete",
            EventKind::Abandon => "abandon",
            EventKind::Restarted => "restarted",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RouteEvent {
    pub fn kind(&self) -> EventKind {
        match self {
            RouteEvent::DispatchStarted { .. } => EventKind::DispatchStarted,
            RouteEvent::DispatchHeld { .. } => EventKind::DispatchHeld,
            RouteEvent::LeaseExpired { .. } => EventKind::LeaseExpired,
            RouteEvent::Failed(_) => EventKind::Failed,
            RouteEvent::Succeeded { .. } => EventKind::Succeeded,
            RouteEvent::DeadlineReached { .. } => EventKind::DeadlineReached,
            RouteEvent::CandidatesEvaluated { .. } => EventKind::CandidatesEvaluated,
            RouteEvent::WorkSubmitted { .. } => EventKind::WorkSubmitted,
            RouteEvent::Manual { action, .. } => match action {
                ManualAction::RetryNow => EventKind::RetryNow,
                ManualAction::SkipNow => EventKind::SkipNow,
                ManualAction::CancelWait => EventKind::CancelWait,
                ManualAction::Stop => EventKind::Stop,
            },
            RouteEvent::Complete { .. } => EventKind::Complete,
            RouteEvent::Abandon { .. } => EventKind::Abandon,
            RouteEvent::Restarted => EventKind::Restarted,
        }
    }

    /// The generation this event was issued for (`None` for `Restarted`).
    pub fn generation(&self) -> Option<u64> {
        match self {
            RouteEvent::DispatchStarted { generation, .. }
            | RouteEvent::DispatchHeld { generation, .. }
            | RouteEvent::LeaseExpired { generation }
            | RouteEvent::Succeeded { generation }
            | RouteEvent::DeadlineReached { generation } => Some(*generation),
            RouteEvent::Failed(report) => Some(report.evidence_generation),
            RouteEvent::CandidatesEvaluated {
                expected_generation, ..
            }
            | RouteEvent::WorkSubmitted { expected_generation }
            | RouteEvent::Manual {
                expected_generation, ..
            }
            | RouteEvent::Complete { expected_generation }
            | RouteEvent::Abandon { expected_generation } => Some(*expected_generation),
            RouteEvent::Restarted => None,
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Effects and results
// ------------------------------------------------------------------------------------------------

/// An instruction for the server, performed after the new state is committed, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum RouteEffect {
    /// Arm (or re-arm) the route's timer; at `deadline` submit `DeadlineReached { generation }`.
    ArmTimer {
        deadline: DateTime<Utc>,
        generation: u64,
    },
    /// Disarm the route's timer (a stale fire would be rejected anyway).
    CancelTimer,
    /// An attempt is scheduled and provably not started: submit
    /// `DispatchStarted { generation }`, commit, then perform the resulting `Launch`.
    BeginDispatch {
        candidate_id: String,
        candidate_index: u32,
        attempt: u32,
        kind: AttemptKind,
        generation: u64,
    },
    /// The attempt is recorded as started: launch it now. Evidence and results of this attempt
    /// carry `invocation_generation`. `resume`: the agent session it loads (the retry held
    /// output waits for, see [`held`]).
    Launch {
        candidate_id: String,
        candidate_index: u32,
        attempt: u32,
        kind: AttemptKind,
        invocation_generation: u64,
        resume: Option<String>,
    },
    /// The attempt is recorded as started, but starting it would replay the prompt after output
    /// an agent session holds (see [`held`]): launch nothing, and submit its failure (not a
    /// provider error; output held) for `generation` in the same transaction.
    RefuseStart { generation: u64 },
    /// Abort the in-flight attempt (its late evidence will be stale).
    AbortDispatch { attempt: u32 },
    /// Compute the eligibility of the profile's candidates and submit `CandidatesEvaluated`
    /// with `expected_generation = generation`. `excluded` are already out for this cycle.
    EvaluateCandidates { generation: u64, excluded: Vec<String> },
    /// Tell a person that the route needs them.
    NotifyPerson { reason: ActionReason },
    /// The route reached a terminal state: release whatever it holds (timers, leases).
    RouteClosed { state: StateName },
}

/// The result of [`step`]: commit `next` (and a history row with `decision`), then perform
/// `effects`. When `changed` is false, `next` equals the input and there is nothing to commit;
/// `effects` may still hold re-arm instructions (restart reconciliation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub next: RouteState,
    pub effects: Vec<RouteEffect>,
    /// The policy decision made by this transition, if any.
    pub decision: Option<Decision>,
    /// The gate a failure was decided with: the report's own, or the gate of the session it
    /// offered when the step granted the offer (`held::granted`; the route then holds the
    /// output if that decision retries). `None` for any other event.
    pub gate: Option<Gate>,
    pub changed: bool,
}

/// Why an event was rejected. The route is untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The event was issued for another generation: someone else won (HTTP 409 with the
    /// current snapshot).
    #[error("[RT1001] stale generation {given}: the route is at generation {current} ({state})")]
    StaleGeneration {
        given: u64,
        current: u64,
        state: StateName,
    },
    /// The event makes no sense in this state.
    #[error("[RT1002] `{event}` is not allowed while the route is {state}")]
    NotAllowed { state: StateName, event: EventKind },
    /// A timer fired early; re-arm it.
    #[error("[RT1003] the deadline {deadline} is not reached at {now}")]
    DeadlineNotReached {
        deadline: DateTime<Utc>,
        now: DateTime<Utc>,
    },
    /// The failure carried another candidate's policy (a caller bug).
    #[error(
        "[RT1004] the failure carries the policy of candidate `{given}`, but the route is on `{current}`"
    )]
    PolicyForOtherCandidate { given: String, current: String },
    /// The generation counter cannot advance (after 2^64 - 1 transitions).
    #[error("[RT1005] the route's generation counter is exhausted")]
    GenerationExhausted,
    /// A route needs at least one candidate.
    #[error("[RT1006] a route needs at least one candidate")]
    NoCandidates,
}
