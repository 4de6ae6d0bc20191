//! A transition's effects, read once and in order: the server's only reader of `RouteEffect`.
//!
//! [`Plan::of`] turns what `policy::route::step` asked for into the two things the engine does
//! with it: what the step's own transaction writes (the route's timer row, due at the
//! `ArmTimer` deadline, the one source of that time) and the acts that run after its commit,
//! in the order the machine gave them ([`super::effects`] runs them). The transaction also
//! asks the plan which dispatch it may begin at once ([`Plan::chained_begin`]), whether a
//! launch follows ([`Plan::launches`]) and whether the start it recorded must fail at once
//! ([`Plan::refused`]: `RefuseStart`).
//!
//! Effects with nothing left to do here: `CancelTimer` (no `ArmTimer`: the timer row goes),
//! `RouteClosed` (the step's transaction removed what the route held), and `NotifyPerson`
//! (the outbox tells people, from `policy::notify`, in the same transaction).

use chrono::{DateTime, Utc};
use policy::route::RouteEffect;

/// What runs after a step's commit, one effect each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Act {
    /// A timer was armed: the scheduler looks again.
    Wake,
    /// The attempt in flight stops (its late evidence will be stale).
    Abort { attempt: u32 },
    /// The pending attempt at `generation` goes through the gate (a step of its own, unless
    /// the transaction chained it).
    Begin { generation: u64 },
    /// The attempt recorded as started goes to its dispatcher, loading the agent session
    /// `resume` (the retry held output waits for).
    Launch {
        attempt: u32,
        generation: u64,
        resume: Option<String>,
    },
    /// Switching: the candidates' eligibility, then the step that picks one.
    Evaluate { generation: u64 },
}

impl Act {
    /// In memory only: no read or write of its own, so a dispatch that follows it may still
    /// begin in the step's transaction.
    fn in_memory(&self) -> bool {
        matches!(self, Act::Wake | Act::Abort { .. })
    }
}

/// A transition's effects, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The route's timer as the transition leaves it: due at this time for this generation
    /// (`ArmTimer`), or none.
    pub(crate) timer: Option<(DateTime<Utc>, u64)>,
    /// After the commit, in order.
    pub(crate) acts: Vec<Act>,
    /// The attempt recorded as started at this generation must fail at once, in the same
    /// transaction, before any dispatcher is asked: starting it would replay the prompt after
    /// output an agent session holds (`RefuseStart`).
    pub(crate) refused: Option<u64>,
}

impl Plan {
    pub(crate) fn of(effects: &[RouteEffect]) -> Plan {
        let mut plan = Plan::default();
        for effect in effects {
            match effect {
                RouteEffect::ArmTimer { deadline, generation } => {
                    plan.timer.get_or_insert((*deadline, *generation));
                    plan.acts.push(Act::Wake);
                }
                RouteEffect::CancelTimer
                | RouteEffect::NotifyPerson { .. }
                | RouteEffect::RouteClosed { .. } => {}
                RouteEffect::AbortDispatch { attempt } => plan.acts.push(Act::Abort { attempt: *attempt }),
                RouteEffect::BeginDispatch { generation, .. } => plan.acts.push(Act::Begin {
                    generation: *generation,
                }),
                RouteEffect::Launch {
                    attempt,
                    invocation_generation,
                    resume,
                    ..
                } => plan.acts.push(Act::Launch {
                    attempt: *attempt,
                    generation: *invocation_generation,
                    resume: resume.clone(),
                }),
                RouteEffect::RefuseStart { generation } => plan.refused = Some(*generation),
                RouteEffect::EvaluateCandidates { generation, .. } => plan.acts.push(Act::Evaluate {
                    generation: *generation,
                }),
            }
        }
        plan
    }

    /// The dispatch the step's own transaction may begin (its generation): the first act
    /// with reads or writes of its own, when it is a `Begin`.
    pub(crate) fn chained_begin(&self) -> Option<u64> {
        match self.acts.iter().find(|act| !act.in_memory()) {
            Some(Act::Begin { generation }) => Some(*generation),
            _ => None,
        }
    }

    /// Whether an attempt goes to its dispatcher after the commit (the transaction reads what
    /// it needs while it holds the route).
    pub(crate) fn launches(&self) -> bool {
        self.acts.iter().any(|act| matches!(act, Act::Launch { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::route::{ActionReason, AttemptKind, StateName};

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    fn begin(generation: u64) -> RouteEffect {
        RouteEffect::BeginDispatch {
            candidate_id: "main".into(),
            candidate_index: 0,
            attempt: 2,
            kind: AttemptKind::Retry,
            generation,
        }
    }

    #[test]
    fn the_timer_is_due_at_the_arm_timers_deadline_and_wakes_the_scheduler() {
        let plan = Plan::of(&[
            RouteEffect::AbortDispatch { attempt: 1 },
            RouteEffect::ArmTimer {
                deadline: at(60),
                generation: 4,
            },
        ]);
        assert_eq!(plan.timer, Some((at(60), 4)));
        assert_eq!(plan.acts, vec![Act::Abort { attempt: 1 }, Act::Wake]);
        assert_eq!(plan.chained_begin(), None);
        assert!(!plan.launches());
    }

    #[test]
    fn effects_with_nothing_left_to_do_leave_no_timer_and_no_act() {
        let plan = Plan::of(&[
            RouteEffect::CancelTimer,
            RouteEffect::NotifyPerson {
                reason: ActionReason::EffectUnsafe,
            },
            RouteEffect::RouteClosed {
                state: StateName::Abandoned,
            },
        ]);
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn a_begin_is_chained_only_when_nothing_with_reads_or_writes_comes_first() {
        let after_abort = Plan::of(&[RouteEffect::AbortDispatch { attempt: 1 }, begin(5)]);
        assert_eq!(after_abort.chained_begin(), Some(5));
        let after_evaluate = Plan::of(&[
            RouteEffect::EvaluateCandidates {
                generation: 5,
                excluded: Vec::new(),
            },
            begin(6),
        ]);
        assert_eq!(after_evaluate.chained_begin(), None);
        assert_eq!(
            after_evaluate.acts,
            vec![Act::Evaluate { generation: 5 }, Act::Begin { generation: 6 }],
            "in the machine's order"
        );
    }

    #[test]
    fn a_launch_carries_the_invocation_generation() {
        let plan = Plan::of(&[RouteEffect::Launch {
            candidate_id: "main".into(),
            candidate_index: 0,
            attempt: 3,
            kind: AttemptKind::Retry,
            invocation_generation: 7,
            resume: Some("sess-1".into()),
        }]);
        assert!(plan.launches());
        assert_eq!(
            plan.acts,
            vec![Act::Launch {
                attempt: 3,
                generation: 7,
                resume: Some("sess-1".into()),
            }]
        );
        assert_eq!(plan.refused, None);
    }

    #[test]
    fn a_refused_start_launches_nothing() {
        let plan = Plan::of(&[RouteEffect::RefuseStart { generation: 9 }]);
        assert_eq!(plan.refused, Some(9));
        assert!(!plan.launches());
        assert!(plan.acts.is_empty());
    }
}
