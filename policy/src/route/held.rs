//! Held output: the replay gate's one exception, a retry after assistant output, allowed only
//! when it resumes the very same provider-native session and prompt generation. The route
//! state holds the fact ([`HeldOutput`]), and [`step`](super::step) decides every part of it:
//!
//! 1. A failure is reported with a [`ResumeOffer`] when the attempt's agent still holds its
//!    session and the evidence shows real output and no other effect (the classifier says so,
//!    and gives the gate as it would be were that session resumed). The failure's step grants
//!    it ([`granted`]) only for the current attempt's evidence, on the candidate the session
//!    belongs to, when the candidate's policy would retry that same candidate were the gate
//!    open (a retry or a reset wait). Then the offer's gate decides, and the route holds the
//!    output from that step on.
//! 2. While the route holds output, a pending attempt is started only as the retry that
//!    session waits for ([`loads`]): a retry or post-wait attempt of that candidate, on that
//!    agent, for the same work; its `Launch` says which session to load. Any other start (a
//!    switch to another candidate above all) would replay the prompt after output elsewhere:
//!    it is recorded as started and then refused (`RouteEffect::RefuseStart`), so nothing runs.
//! 3. The fact goes with a new route cycle: a success, or a person's decision from
//!    `action_required`.

use crate::classification::Gate;
use serde::{Deserialize, Serialize};

/// An agent session that holds an attempt's output and that its agent can load again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeldSession {
    pub session_id: String,
    /// The configured agent that holds it (a retry loads it only on the same one).
    pub agent_id: String,
    /// The candidate whose attempt it was.
    pub candidate_id: String,
    /// The digest of the work it answered (a retry loads it only for the same prompt).
    pub work_digest: String,
}

/// The route's output a session holds: granted by the failure at `generation`, in force for
/// the rest of the route cycle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeldOutput {
    #[serde(flatten)]
    pub session: HeldSession,
    /// The generation of the failure that granted it.
    pub generation: u64,
}

/// A failure's offer of the session that still holds its output, with the gate the classifier
/// gives the same evidence were that session resumed. Made only when the evidence shows real
/// output and no other effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeOffer {
    pub session: HeldSession,
    pub gate: Gate,
}

/// What the pending attempt would run on, as far as held output cares: the configured agent
/// that would run it (an `acp` candidate's; `None` for any other dispatcher) and the digest of
/// the route's work. The server gives it while the route holds output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchFacts {
    pub agent_id: Option<String>,
    pub work_digest: Option<String>,
}

/// Whether `offer`, made with the failure of the attempt at `evidence_generation` on the
/// route's current `candidate` (at `generation`), is granted: `retries_same` says whether the
/// candidate's policy would retry that same candidate were the gate open.
pub(super) fn granted(
    offer: &ResumeOffer,
    evidence_generation: u64,
    generation: u64,
    candidate: &str,
    retries_same: impl FnOnce() -> bool,
) -> bool {
    evidence_generation == generation
        && offer.session.candidate_id == candidate
        && !offer.session.session_id.is_empty()
        && retries_same()
}

/// Whether an attempt of `kind` on `candidate`, running on what `facts` say, is the retry the
/// `held` session waits for (it loads the session); anything else would replay the prompt.
pub(super) fn loads(held: &HeldOutput, retry: bool, candidate: &str, facts: Option<&LaunchFacts>) -> bool {
    let s = &held.session;
    retry
        && candidate == s.candidate_id
        && facts.is_some_and(|f| {
            f.agent_id.as_deref() == Some(s.agent_id.as_str())
                && f.work_digest.as_deref() == Some(s.work_digest.as_str())
        })
}
