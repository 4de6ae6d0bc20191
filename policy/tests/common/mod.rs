//! Test helpers shared by the integration tests: builders for classifications and policies,
//! and a `Driver` that plays the server's part (it answers effects with the events the server
//! would send) over the public API only.
#![allow(dead_code)]

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use policy::{
    class::SemanticCode,
    classification::{ClassState, Classification, Confidence, Gate, GateReason, UnclassifiedReason},
    document::{
        CandidatePolicy, ClassPolicy, OnExhausted, RetryPolicy, ValidatedCandidatePolicy,
        ValidatedPolicyDocument, WaitForResetPolicy,
    },
    route::{
        start, step, CandidateOption, FailureReport, ManualAction, RouteEffect, RouteEvent, RouteState,
        StateName, Transition, TransitionError,
    },
};

pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()
}

pub(crate) fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

pub(crate) fn classified(code: SemanticCode, at: DateTime<Utc>) -> Classification {
    Classification {
        code: Some(code),
        class: code.class().into(),
        reason: None,
        catalogue_version: "2026.11.1".into(),
        confidence: Confidence::High,
        scope: None,
        classifier_rule: Some(format!("test.{}", code.as_str())),
        provider_id: Some("anthropic".into()),
        model_id: None,
        phase: None,
        occurred_at: Some(at),
        retry_after_seconds: None,
        reset_at: None,
        safe_excerpt: None,
    }
}

pub(crate) fn with_reset(mut c: Classification, reset_at: DateTime<Utc>) -> Classification {
    c.reset_at = Some(reset_at);
    c
}

pub(crate) fn unclassified(at: DateTime<Utc>) -> Classification {
    Classification {
        code: None,
        class: ClassState::Unclassified,
        reason: Some(UnclassifiedReason::NoMatch),
        confidence: Confidence::Low,
        classifier_rule: None,
        safe_excerpt: Some("something odd happened".into()),
        ..classified(SemanticCode::ProviderUnavailable, at)
    }
}

/// A class policy: `retry` = (max_retries, initial_interval_seconds), `wait` = max_wait_seconds.
pub(crate) fn class_policy(
    retry: Option<(u32, u64)>,
    wait: Option<u64>,
    on_exhausted: OnExhausted,
) -> ClassPolicy {
    ClassPolicy {
        retry: match retry {
            Some((max_retries, initial_interval_seconds)) => RetryPolicy {
                enabled: true,
                max_retries,
                initial_interval_seconds,
            },
            None => ClassPolicy::default().retry,
        },
        wait_for_reset: match wait {
            Some(max_wait_seconds) => WaitForResetPolicy {
                enabled: true,
                max_wait_seconds,
            },
            None => ClassPolicy::default().wait_for_reset,
        },
        on_exhausted,
    }
}

pub(crate) fn candidate(id: &str, transient: ClassPolicy, hard: ClassPolicy) -> CandidatePolicy {
    CandidatePolicy {
        id: id.into(),
        transient,
        hard,
    }
}

pub(crate) fn document(candidates: Vec<CandidatePolicy>) -> ValidatedPolicyDocument {
    ValidatedPolicyDocument::try_from(policy::document::PolicyDocument {
        version: 1,
        candidates,
    })
    .expect("test document is valid")
}

/// Plays the server: holds the committed state, the clock, the profile and circuit verdicts.
pub(crate) struct Driver {
    pub(crate) state: RouteState,
    pub(crate) now: DateTime<Utc>,
    pub(crate) doc: ValidatedPolicyDocument,
    /// Candidates that can never take work (missing = eligible now).
    pub(crate) ineligible: Vec<String>,
    pub(crate) history: Vec<Transition>,
}

impl Driver {
    pub(crate) fn start(doc: ValidatedPolicyDocument) -> Driver {
        Driver::start_with(doc, &[])
    }

    pub(crate) fn start_with(doc: ValidatedPolicyDocument, ineligible: &[&str]) -> Driver {
        let ineligible: Vec<String> = ineligible.iter().map(|s| s.to_string()).collect();
        let options = options(&doc, &ineligible);
        let t = start(&options).expect("route starts");
        Driver {
            state: t.next.clone(),
            now: t0(),
            doc,
            ineligible,
            history: vec![t],
        }
    }

    pub(crate) fn gen(&self) -> u64 {
        self.state.generation()
    }

    pub(crate) fn name(&self) -> StateName {
        self.state.state_name()
    }

    pub(crate) fn try_step(&mut self, event: RouteEvent) -> Result<Transition, TransitionError> {
        let t = step(&self.state, event, self.now)?;
        self.state = t.next.clone();
        self.history.push(t.clone());
        Ok(t)
    }

    pub(crate) fn step(&mut self, event: RouteEvent) -> Transition {
        let name = self.name();
        let kind = event.kind();
        self.try_step(event)
            .unwrap_or_else(|e| panic!("{kind} in {name} was rejected: {e}"))
    }

    pub(crate) fn dispatch(&mut self) -> Transition {
        let generation = self.gen();
        self.step(RouteEvent::DispatchStarted {
            generation,
            launch: None,
        })
    }

    pub(crate) fn policy_now(&self) -> Option<ValidatedCandidatePolicy> {
        self.doc.candidate(&self.state.candidate().id).cloned()
    }

    pub(crate) fn failure(&self, classification: Classification, gate: Gate) -> RouteEvent {
        RouteEvent::Failed(Box::new(FailureReport {
            evidence_generation: self.gen(),
            classification,
            gate,
            policy: self.policy_now(),
            resume: None,
        }))
    }

    pub(crate) fn fail(&mut self, classification: Classification, gate: Gate) -> Transition {
        let e = self.failure(classification, gate);
        self.step(e)
    }

    pub(crate) fn succeed(&mut self) -> Transition {
        let generation = self.gen();
        self.step(RouteEvent::Succeeded { generation })
    }

    /// Moves the clock to the pending deadline and fires the timer.
    pub(crate) fn fire(&mut self) -> Transition {
        let deadline = self.state.deadline().expect("a pending deadline");
        self.now = self.now.max(deadline);
        let generation = self.gen();
        self.step(RouteEvent::DeadlineReached { generation })
    }

    pub(crate) fn evaluate(&mut self) -> Transition {
        let candidates = options(&self.doc, &self.ineligible);
        let expected_generation = self.gen();
        self.step(RouteEvent::CandidatesEvaluated {
            expected_generation,
            candidates,
        })
    }

    pub(crate) fn manual(&mut self, action: ManualAction) -> Transition {
        let expected_generation = self.gen();
        self.step(RouteEvent::Manual {
            action,
            expected_generation,
        })
    }

    pub(crate) fn last(&self) -> &Transition {
        self.history.last().expect("history")
    }
}

pub(crate) fn options(doc: &ValidatedPolicyDocument, ineligible: &[String]) -> Vec<CandidateOption> {
    doc.candidates()
        .iter()
        .map(|c| {
            if ineligible.iter().any(|i| i == c.id()) {
                CandidateOption::never(c.id())
            } else {
                CandidateOption::now(c.id())
            }
        })
        .collect()
}

pub(crate) fn deny(reason: GateReason) -> Gate {
    Gate::deny(reason)
}

/// The single ArmTimer deadline among effects.
pub(crate) fn armed(t: &Transition) -> Option<DateTime<Utc>> {
    t.effects.iter().find_map(|e| match e {
        RouteEffect::ArmTimer { deadline, .. } => Some(*deadline),
        _ => None,
    })
}
