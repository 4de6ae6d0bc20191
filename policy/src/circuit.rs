//! Shared resource circuits: every decision about them, pure. The server only reads the rows
//! these functions take and persists the rows they return.
//!
//! A circuit tracks one resource many routes share: a provider (`provider:<p>`), an account on
//! it (`account:<p>`) or a model (`model:<p>/<m>`). A trusted, scoped failure opens it; while
//! it is open, candidates on it are not eligible and their pending attempts are parked (a
//! *hold*) instead of dispatched, so a provider's bad minute does not become a retry herd.
//! When it expires, exactly one route takes the *probe lease* (a compare-and-set on the row,
//! the server's job) and tries; the others stay held until the probe succeeds (any success
//! closes the circuit) or fails (it opens again, for longer).
//!
//! ```text
//! closed ──trusted scoped failure──▶ open(until) ──until passes, a route takes the lease──▶ probing
//!   ▲                                   ▲  │                                                  │
//!   └──────────── any success ──────────┼──┴──────────── any success ─────────────────────────┤
//!                                       └──── the probe fails, or its holder moves on ────────┘
//! ```
//!
//! Why the backoff grows only per episode: attempts already in flight when a circuit opens
//! fail too, and counting each would escalate the wait for one incident. A failure counts
//! when it opens a closed circuit or when it is the probe's own failure.

use crate::{
    api::{CircuitState, CircuitView},
    classification::{ClassState, Classification, Confidence, Scope},
    route::{Eligibility, Hold},
    time::{after, after_seconds},
};
use chrono::{DateTime, TimeDelta, Utc};

/// How long routes held behind another route's probe wait before they look again (a lost or
/// hung probe cannot hold them forever).
pub const PROBE_WAIT_SECONDS: u64 = 60;
/// Backoff of a circuit opened without a trusted reset: 30 s, doubling per episode...
pub const BASE_BACKOFF_SECONDS: u64 = 30;
/// ...capped at one hour.
pub const MAX_BACKOFF_SECONDS: u64 = 3_600;

impl CircuitState {
    pub const ALL: [CircuitState; 3] = [CircuitState::Closed, CircuitState::Open, CircuitState::Probing];

    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::Probing => "probing",
        }
    }

    pub fn parse(s: &str) -> Option<CircuitState> {
        CircuitState::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// The circuit keys a target's health is tracked under (none without a provider id).
pub fn keys(provider_id: Option<&str>, model_id: Option<&str>) -> Vec<String> {
    let Some(p) = provider_id else {
        return Vec::new();
    };
    let mut keys = vec![format!("provider:{p}"), format!("account:{p}")];
    if let Some(m) = model_id {
        keys.push(format!("model:{p}/{m}"));
    }
    keys
}

/// The circuit a trusted failure opens, if any: high confidence, classified, scoped to a
/// provider, account or model whose identifiers are known (the target's first, else the
/// classification's).
pub fn key_opened_by(
    classification: &Classification,
    provider_id: Option<&str>,
    model_id: Option<&str>,
) -> Option<String> {
    let c = classification;
    if c.class == ClassState::Unclassified || c.confidence != Confidence::High {
        return None;
    }
    let provider = provider_id.or(c.provider_id.as_deref())?;
    match c.scope? {
        Scope::Provider => Some(format!("provider:{provider}")),
        Scope::Account => Some(format!("account:{provider}")),
        Scope::Model => {
            let model = model_id.or(c.model_id.as_deref())?;
            Some(format!("model:{provider}/{model}"))
        }
        Scope::Profile | Scope::Request => None,
    }
}

/// How one circuit bears on one route's pending attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bearing {
    /// Nothing in the way.
    Clear,
    /// Not before this instant.
    Until(DateTime<Utc>),
    /// Expired: the route may try to take the probe lease.
    Probe,
}

fn bearing(circuit: &CircuitView, route_id: &str, now: DateTime<Utc>) -> Bearing {
    match circuit.state {
        CircuitState::Closed => Bearing::Clear,
        CircuitState::Open => match circuit.open_until {
            Some(until) if until > now => Bearing::Until(until),
            _ => Bearing::Probe,
        },
        CircuitState::Probing if circuit.probe_route_id.as_deref() == Some(route_id) => Bearing::Clear,
        CircuitState::Probing => {
            let wait = after_seconds(now, PROBE_WAIT_SECONDS);
            Bearing::Until(circuit.open_until.map_or(wait, |u| u.max(wait)))
        }
    }
}

/// What the dispatch gate decides for a route's pending attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// Dispatch, after taking the probe lease of each of these expired circuits (if any lease
    /// is lost to another route, hold with [`probe_lost`]).
    Go { probe: Vec<String> },
    /// Park the attempt until the hold's instant (or until a circuit closes).
    Hold(Hold),
}

/// The gate for a pending attempt whose candidate's circuits are `circuits` (the ones that
/// exist; a missing circuit is closed). The latest hold wins: the attempt goes only when
/// nothing holds it.
pub fn gate<'a>(
    circuits: impl IntoIterator<Item = &'a CircuitView>,
    route_id: &str,
    now: DateTime<Utc>,
) -> GateDecision {
    let mut hold: Option<Hold> = None;
    let mut probe = Vec::new();
    for c in circuits {
        match bearing(c, route_id, now) {
            Bearing::Clear => {}
            Bearing::Probe => probe.push(c.key.clone()),
            Bearing::Until(until) => {
                if hold.as_ref().is_none_or(|h| until > h.until) {
                    hold = Some(Hold {
                        circuit: c.key.clone(),
                        until,
                    });
                }
            }
        }
    }
    match hold {
        Some(h) => GateDecision::Hold(h),
        None => GateDecision::Go { probe },
    }
}

/// The hold after another route took the probe lease of `key` first.
pub fn probe_lost(key: &str, now: DateTime<Utc>) -> Hold {
    Hold {
        circuit: key.to_owned(),
        until: after_seconds(now, PROBE_WAIT_SECONDS),
    }
}

/// Whether, and from when, a candidate whose circuits are `circuits` can take an attempt of
/// `route_id`. An expired circuit is eligible now (the route may probe it).
pub fn eligibility<'a>(
    circuits: impl IntoIterator<Item = &'a CircuitView>,
    route_id: &str,
    now: DateTime<Utc>,
) -> Eligibility {
    match gate(circuits, route_id, now) {
        GateDecision::Go { .. } => Eligibility::Now,
        GateDecision::Hold(h) => Eligibility::At(h.until),
    }
}

/// The circuit `key` after a trusted failure of `route_id`'s attempt.
///
/// `current` is the row as it is (`None`: closed). `keeps_probing` says whether the route stays
/// on the candidate with recovery pending (its own retry or reset wait is then the probe, so it
/// holds the lease). A trusted reset hint in the classification sets the reopening time;
/// otherwise the backoff of the episode does. The circuit never closes earlier than it already
/// would have.
pub fn open_after_failure(
    current: Option<&CircuitView>,
    key: &str,
    route_id: &str,
    keeps_probing: bool,
    classification: &Classification,
    now: DateTime<Utc>,
) -> CircuitView {
    let c = classification;
    let (failures, already_until) = match current {
        None => (1, None),
        Some(row) if row.state == CircuitState::Closed => (1, None),
        Some(row)
            if row.state == CircuitState::Probing && row.probe_route_id.as_deref() == Some(route_id) =>
        {
            (row.failures.saturating_add(1), None)
        }
        Some(row) => (row.failures.max(1), row.open_until),
    };
    let hinted = c
        .reset_at
        .filter(|r| *r > now)
        .or_else(|| {
            c.retry_after_seconds
                .map(|s| after_seconds(c.occurred_at.unwrap_or(now).min(now), s))
        })
        .filter(|r| *r > now);
    let until = hinted.unwrap_or_else(|| after(now, TimeDelta::seconds(backoff_seconds(failures))));
    let until = already_until.map_or(until, |u| u.max(until));
    let other_holder = current
        .filter(|r| r.state == CircuitState::Probing && r.probe_route_id.as_deref() != Some(route_id))
        .and_then(|r| r.probe_route_id.clone());
    let probe_route_id = other_holder.or_else(|| keeps_probing.then(|| route_id.to_owned()));
    CircuitView {
        key: key.to_owned(),
        state: if probe_route_id.is_some() {
            CircuitState::Probing
        } else {
            CircuitState::Open
        },
        open_until: Some(until),
        failures,
        code: c.code.map(|c| c.as_str().to_owned()),
        probe_route_id,
    }
}

/// Backoff of the `failures`-th episode: 30 s doubling, capped at an hour.
fn backoff_seconds(failures: u32) -> i64 {
    let shift = failures.saturating_sub(1).min(7);
    let secs = BASE_BACKOFF_SECONDS
        .saturating_mul(1 << shift)
        .min(MAX_BACKOFF_SECONDS);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::SemanticCode;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()
    }

    fn secs(s: i64) -> DateTime<Utc> {
        now() + TimeDelta::seconds(s)
    }

    fn circuit(key: &str, state: CircuitState, until: Option<i64>, probe: Option<&str>) -> CircuitView {
        CircuitView {
            key: key.into(),
            state,
            open_until: until.map(secs),
            failures: 1,
            code: None,
            probe_route_id: probe.map(str::to_owned),
        }
    }

    fn trusted(scope: Scope) -> Classification {
        Classification {
            code: Some(SemanticCode::ProviderOverloaded),
            class: ClassState::Transient,
            reason: None,
            catalogue_version: "t".into(),
            confidence: Confidence::High,
            scope: Some(scope),
            classifier_rule: Some("r".into()),
            provider_id: None,
            model_id: None,
            phase: None,
            occurred_at: Some(now()),
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }

    #[test]
    fn a_target_is_tracked_under_its_provider_account_and_model() {
        assert_eq!(
            keys(Some("anthropic"), Some("opus")),
            ["provider:anthropic", "account:anthropic", "model:anthropic/opus"]
        );
        assert_eq!(keys(Some("openai"), None), ["provider:openai", "account:openai"]);
        assert!(keys(None, Some("m")).is_empty());
    }

    #[test]
    fn only_trusted_scoped_failures_open_a_circuit() {
        assert_eq!(
            key_opened_by(&trusted(Scope::Model), Some("p"), Some("m")).as_deref(),
            Some("model:p/m")
        );
        assert_eq!(key_opened_by(&trusted(Scope::Request), Some("p"), None), None);
        assert_eq!(key_opened_by(&trusted(Scope::Model), Some("p"), None), None);
        let mut low = trusted(Scope::Provider);
        low.confidence = Confidence::Medium;
        assert_eq!(key_opened_by(&low, Some("p"), None), None);
        let mut unclassified = trusted(Scope::Provider);
        unclassified.class = ClassState::Unclassified;
        assert_eq!(key_opened_by(&unclassified, Some("p"), None), None);
        // Without a target provider, the classification's own identifier is used.
        let mut named = trusted(Scope::Account);
        named.provider_id = Some("q".into());
        assert_eq!(key_opened_by(&named, None, None).as_deref(), Some("account:q"));
    }

    #[test]
    fn the_gate_holds_until_the_latest_circuit_and_probes_expired_ones() {
        let a = circuit("provider:p", CircuitState::Open, Some(30), None);
        let b = circuit("model:p/m", CircuitState::Open, Some(90), None);
        assert_eq!(
            gate([&a, &b], "r1", now()),
            GateDecision::Hold(Hold {
                circuit: "model:p/m".into(),
                until: secs(90)
            })
        );
        let expired = circuit("provider:p", CircuitState::Open, Some(-1), None);
        assert_eq!(
            gate([&expired], "r1", now()),
            GateDecision::Go {
                probe: vec!["provider:p".into()]
            }
        );
        let closed = circuit("provider:p", CircuitState::Closed, None, None);
        assert_eq!(gate([&closed], "r1", now()), GateDecision::Go { probe: vec![] });
        assert_eq!(gate([], "r1", now()), GateDecision::Go { probe: vec![] });
    }

    #[test]
    fn a_probe_holds_everyone_but_its_holder_for_at_least_the_probe_wait() {
        let probing = circuit("provider:p", CircuitState::Probing, Some(-5), Some("r1"));
        assert_eq!(gate([&probing], "r1", now()), GateDecision::Go { probe: vec![] });
        assert_eq!(
            gate([&probing], "r2", now()),
            GateDecision::Hold(Hold {
                circuit: "provider:p".into(),
                until: secs(60)
            })
        );
        assert_eq!(eligibility([&probing], "r2", now()), Eligibility::At(secs(60)));
        assert_eq!(eligibility([&probing], "r1", now()), Eligibility::Now);
        assert_eq!(probe_lost("provider:p", now()).until, secs(60));
    }

    #[test]
    fn backoff_doubles_per_episode_and_is_capped() {
        let seq: Vec<i64> = (1..=10).map(backoff_seconds).collect();
        assert_eq!(seq, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        assert_eq!(backoff_seconds(u32::MAX), 3600);
        assert_eq!(backoff_seconds(0), 30);
    }

    #[test]
    fn a_failure_opens_for_the_backoff_or_a_trusted_hint_and_never_shortens() {
        let c = trusted(Scope::Provider);
        let opened = open_after_failure(None, "provider:p", "r1", false, &c, now());
        assert_eq!(
            (opened.state, opened.open_until, opened.failures),
            (CircuitState::Open, Some(secs(30)), 1)
        );
        assert_eq!(opened.code.as_deref(), Some("provider_overloaded"));
        // In-flight failures of the same episode do not escalate the backoff...
        let again = open_after_failure(Some(&opened), "provider:p", "r2", false, &c, secs(1));
        assert_eq!((again.failures, again.open_until), (1, Some(secs(31))));
        // ...nor shorten the wait a longer hint set.
        let mut long = c.clone();
        long.retry_after_seconds = Some(600);
        let long = open_after_failure(None, "provider:p", "r1", false, &long, now());
        let later = open_after_failure(Some(&long), "provider:p", "r2", false, &c, secs(1));
        assert_eq!(later.open_until, Some(secs(600)));
        // A trusted hint sets the time.
        let mut hinted = c.clone();
        hinted.retry_after_seconds = Some(600);
        let h = open_after_failure(None, "provider:p", "r1", false, &hinted, now());
        assert_eq!(h.open_until, Some(secs(600)));
        // An absurd hint saturates instead of overflowing.
        hinted.retry_after_seconds = Some(u64::MAX);
        let h = open_after_failure(None, "provider:p", "r1", false, &hinted, now());
        assert_eq!(h.open_until, Some(crate::time::latest()));
    }

    #[test]
    fn the_probes_own_failure_escalates_and_a_route_staying_on_recovery_holds_the_lease() {
        let c = trusted(Scope::Provider);
        let probing = CircuitView {
            failures: 2,
            ..circuit("provider:p", CircuitState::Probing, Some(-1), Some("r1"))
        };
        let failed = open_after_failure(Some(&probing), "provider:p", "r1", false, &c, now());
        assert_eq!(
            (failed.state, failed.failures, failed.open_until),
            (CircuitState::Open, 3, Some(secs(120)))
        );
        let kept = open_after_failure(Some(&probing), "provider:p", "r1", true, &c, now());
        assert_eq!(
            (kept.state, kept.probe_route_id.as_deref()),
            (CircuitState::Probing, Some("r1"))
        );
        // Another route's failure leaves the holder's lease in place.
        let other = open_after_failure(Some(&probing), "provider:p", "r2", true, &c, now());
        assert_eq!(other.probe_route_id.as_deref(), Some("r1"));
    }

    #[test]
    fn stored_spellings_round_trip() {
        for s in CircuitState::ALL {
            assert_eq!(CircuitState::parse(s.as_str()), Some(s));
        }
        assert_eq!(CircuitState::parse("half_open"), None);
    }
}
