//! What is submitted to a route ([`Input`]) and what comes back ([`Applied`]), and a running
//! attempt's live update ([`AttemptUpdate`]): the values the engine and its dispatchers
//! exchange, below both (a dispatcher reaches the engine only through `dispatch::Port`).

use classifier::{Envelope, Verdict};
pub use policy::route::HeldSession;
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
    /// An attempt's evidence ([`Evidence`]: its envelope and what only its own dispatcher
    /// knows); classified once, inside the transaction, against the route's current generation
    /// and the profile's current policy.
    Evidence(Box<Evidence>),
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

/// What an attempt reports: its evidence envelope (contract 1), typed, with the facts beside it
/// that only the dispatcher that ran it can know. From the API or an external runner it is an
/// envelope alone ([`Evidence::of`]).
#[derive(Debug, Clone)]
pub struct Evidence {
    pub envelope: Envelope<'static>,
    /// The agent ended its turn normally (ACP `end_turn`): a success, unless the evidence
    /// carries a failure signal (an agent that tells a provider failure as a message and then
    /// ends its turn); then it is the failure it shows.
    pub turn_ended: bool,
    /// The agent session that still holds the attempt's output and that the agent can load
    /// again. If the evidence shows output and no other effect, it is offered to the route's
    /// step, which grants the gate's resumable exception when the candidate's policy would retry
    /// this same candidate: the route then holds the output (its state's `held`, in the
    /// failure's commit). Otherwise it is plain evidence.
    pub session: Option<HeldSession>,
}

impl Evidence {
    /// An envelope with no fact beside it.
    pub fn of(envelope: Envelope<'static>) -> Evidence {
        Evidence {
            envelope,
            turn_ended: false,
            session: None,
        }
    }
}

impl Input {
    /// [`Input::Evidence`] of an envelope alone.
    pub fn evidence(envelope: Envelope<'static>) -> Input {
        Input::Evidence(Box::new(Evidence::of(envelope)))
    }
}

/// The digest of a route's work: the prompt generation a [`HeldSession`] answered.
pub(crate) fn work_digest(work: &Work) -> String {
    use sha2::Digest;
    let bytes = serde_json::to_vec(work).unwrap_or_default();
    crate::hex::hex(&sha2::Sha256::digest(&bytes))
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
