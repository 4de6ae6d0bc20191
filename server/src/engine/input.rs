//! What is submitted to a route ([`Input`]) and what comes back ([`Applied`]), and a running
//! attempt's live update ([`AttemptUpdate`]): the values the engine and its dispatchers
//! exchange, below both (a dispatcher reaches the engine only through `dispatch::Port`).

use classifier::{Envelope, Verdict};
use policy::{api::Work, route::RouteEvent, wire::RouteSnapshot};
use serde::{Deserialize, Serialize};

/// One live update of a running attempt (an ACP `session/update`, as the agent sent it,
/// bounded), for the route's event stream and the attempt's transcript. Not stored in the
/// database: the route's state is what is durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptUpdate {
    pub route_id: String,
    pub attempt: u32,
    pub generation: u64,
    pub update: serde_json::Value,
}

/// What can be submitted to a route.
#[derive(Debug, Clone)]
pub enum Input {
    Event(RouteEvent),
    /// An evidence envelope for the route's current invocation; classified inside the
    /// transaction against the route's current generation and the profile's current policy.
    Evidence(Box<Envelope<'static>>),
    /// An attempt's evidence envelope (as [`Input::Evidence`]) from an agent whose session
    /// still holds the attempt's output and can be loaded again (`session`). Inside the
    /// transaction, with the route and its policy as they are: if the evidence shows output and
    /// no other effect, and the policy would retry this same candidate, the gate's resumable
    /// exception is granted and the session is recorded in the same commit; otherwise it is
    /// plain evidence.
    Resumable {
        envelope: Box<Envelope<'static>>,
        session: Box<HeldSession>,
    },
    /// The evidence of an attempt whose agent ended its turn normally (ACP `end_turn`), with
    /// the session that holds its output when the agent can load it again. Classified once,
    /// inside the transaction: a success, unless the evidence carries a failure signal (an
    /// agent that tells a provider failure as a message and ends its turn); then it is a
    /// failure, as [`Input::Resumable`] with a session and [`Input::Evidence`] without.
    Answered {
        envelope: Box<Envelope<'static>>,
        session: Option<Box<HeldSession>>,
    },
    /// The attempt started at `generation` succeeded with a result (an HTTP call's response
    /// body), stored with the success in one transaction.
    Succeeded {
        generation: u64,
        result: String,
    },
    /// The route's owner is no longer alive (another replica's lease ran out): taken up as
    /// after a restart (`Restarted`), unless, with its row locked, its owner turns out alive.
    Orphaned,
    /// The caller's next prompt (`work_submitted`), with the new work stored in the same
    /// transaction when there is one.
    Work {
        expected_generation: u64,
        work: Option<Box<Work>>,
    },
    /// A one-prompt caller's work is done once the attempt started at `after` succeeded (a
    /// gateway call whose client got the answer): completes the route if that success left it
    /// active with no attempt in flight; changes nothing otherwise. Submitted with the success
    /// in one delivery, so both commit together.
    Finish {
        after: u64,
    },
}

/// An agent session that holds an attempt's output and that the agent can load again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSession {
    pub session_id: String,
    /// The configured agent that holds it (a retry loads it only on the same one).
    pub agent_id: String,
    /// The candidate whose attempt it was.
    pub candidate_id: String,
    /// The digest of the work it answered (a retry loads it only for the same prompt).
    pub work_digest: String,
}

impl HeldSession {
    /// The digest of a route's work: the prompt generation a session answered.
    pub fn digest(work: &Work) -> String {
        use sha2::Digest;
        let bytes = serde_json::to_vec(work).unwrap_or_default();
        crate::hex::hex(&sha2::Sha256::digest(&bytes))
    }
}

/// The result of a submitted input.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The authoritative snapshot after the input and the transitions its effects caused.
    pub snapshot: RouteSnapshot,
    /// Whether the input itself changed the route.
    pub changed: bool,
    pub verdict: Option<Box<Verdict>>,
}
