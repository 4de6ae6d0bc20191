//! Matching evidence against the catalogue and resolving the matches into one verdict.
//!
//! **Signals.** The envelope is cut into signals, each one piece of evidence a rule can look
//! at: an HTTP response, a JSON-RPC error (the prompt's error included), one run of
//! consecutive agent message chunks, the prompt's stop reason, one stderr entry (a line with
//! its continuation lines, see `crate::stderr`), the exit.
//!
//! **Resolution, in order** (documented in `fixtures/README.md` too):
//! 1. Per signal, the matching rules of the highest tier compete. If they disagree on the
//!    outcome, the signal is *conflicting*. If they agree, the winner is the rule with the
//!    highest confidence, then the smallest ID. Rule order in the files never matters.
//! 2. Across signals, the highest winning tier decides. Several signals at that tier must agree
//!    on the outcome, else the verdict is `unclassified/conflicting`; the representative is the
//!    one with the highest confidence, then the earliest in evidence order — unless one of them
//!    won with a low-confidence rule: then that one represents them (step 3 makes it
//!    `unclassified/low_confidence`), since what agrees with a doubtful signal is its symptom.
//! 3. A low-confidence winner gives `unclassified/low_confidence`; a `not_provider_error` winner
//!    gives `unclassified/not_provider_error`; no match gives `unclassified/no_match`. Stale
//!    evidence (generations differ) is `unclassified/stale` whatever matched.
//! 4. Timing extractors named by the winning rule run on the winning signal, in the rule's
//!    order; the first validated hint counts. Then the rate-limit/quota rule applies: a
//!    `rate_limited` result whose validated reset is more than [`SHORT_RATE_LIMIT_SECS`] away
//!    is not a short rate limit and becomes `quota_limited` (hard).
//!
//! Every step is linear in the input: one literal scan per signal (`crate::scan`), `regex` (no
//! backtracking) only after a rule's cheaper conditions pass, JSON parsed at most once per
//! signal and only when a rule asks for it.

use crate::{
    catalogue::{Catalogue, Outcome, SignalKind, Tier},
    embedded,
    envelope::{AcpErrorEvidence, AcpUpdate, Envelope, EvidenceItem, Headers},
    gate,
    json::Json,
    normalize, redact, stderr,
    timing::Hint,
};
use chrono::{DateTime, Utc};
use policy::{
    class::SemanticCode,
    classification::{
        ClassState, Classification, Confidence, Effects, Gate, PromptDelivery, UnclassifiedReason,
    },
};
use serde::Serialize;
use serde_json::Value;
use std::{borrow::Cow, cell::OnceCell};

/// The longest reset a `rate_limited` result may carry and stay transient: one hour.
pub const SHORT_RATE_LIMIT_SECS: u64 = 3600;

/// The classifier's answer for one envelope: contract 2's classification, flat, with the gate
/// beside it, plus the combined effects and whether the input was truncated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub classification: Classification,
    pub gate: Gate,
    /// Effects given by the adapter combined (OR) with those derived from ACP updates.
    pub effects: Effects,
    /// True when the envelope was cut to its bounds while parsing.
    pub truncated: bool,
}

impl Verdict {
    /// Whether the evidence of a turn the agent ended normally (ACP `end_turn`) carries a
    /// failure signal: an agent that reports a provider failure as a message and then ends its
    /// turn. Text no rule recognises, or that is not a provider error, is the agent's answer;
    /// a low-confidence match does not turn an answer into a failure, and conflicting signals
    /// do.
    pub fn signals_failure(&self) -> bool {
        let c = &self.classification;
        c.class != ClassState::Unclassified || c.reason == Some(UnclassifiedReason::Conflicting)
    }
}

/// One piece of evidence a rule can look at.
pub(crate) struct Signal<'a> {
    pub(crate) kind: SignalKind,
    pub(crate) status: Option<u16>,
    pub(crate) rpc_code: Option<i64>,
    pub(crate) exit_code: Option<i64>,
    pub(crate) exit_signal: Option<&'a str>,
    pub(crate) stop_reason: Option<&'a str>,
    /// The prompt's result reported usage, and it was zero tokens (see the catalogue's
    /// `zero_usage`).
    pub(crate) zero_usage: bool,
    pub(crate) headers: Option<&'a Headers<'a>>,
    pub(crate) text: Cow<'a, str>,
    /// The text as the agent printed it, when `text` reads its whitespace differently
    /// (`crate::normalize`); the excerpt shows this one.
    printed: Option<Cow<'a, str>>,
    /// The ACP error this signal stands for, if any (its JSON root, see [`SignalJson`]).
    pub(crate) acp_error: Option<&'a AcpErrorEvidence<'a>>,
    /// A copy of the text with its control characters read as spaces, made only if the
    /// signal's JSON is looked for and needs it (see [`SignalJson`]).
    spaced: OnceCell<String>,
}

impl<'a> Signal<'a> {
    fn new(kind: SignalKind, text: Cow<'a, str>) -> Signal<'a> {
        // Rules read whitespace as a person does (padding, terminal wraps): `crate::normalize`.
        let (text, printed) = match normalize::for_rules(kind, &text) {
            Some(read) => (Cow::Owned(read), Some(text)),
            None => (text, None),
        };
        Signal {
            kind,
            status: None,
            rpc_code: None,
            exit_code: None,
            exit_signal: None,
            stop_reason: None,
            zero_usage: false,
            headers: None,
            text,
            printed,
            acp_error: None,
            spaced: OnceCell::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn for_test(
        kind: SignalKind,
        text: Cow<'a, str>,
        headers: Option<&'a Headers<'a>>,
    ) -> Signal<'a> {
        let mut s = Signal::new(kind, text);
        s.headers = headers;
        s
    }
}

/// The JSON a rule may read in one signal, found on first use: the structured root (the ACP
/// error object) first, then the JSON found in the text (an HTTP body, an object inside an
/// agent's banner, see `crate::embedded`), then JSON nested in the string values of either
/// (double encoding). Its strings borrow the evidence, or the signal's `spaced` copy of the
/// text with its control characters read as spaces (kept by the signal, so nothing here
/// borrows itself).
pub(crate) struct SignalJson<'a> {
    text: &'a str,
    acp_error: Option<&'a AcpErrorEvidence<'a>>,
    spaced: &'a OnceCell<String>,
    found: OnceCell<FoundJson<'a>>,
}

struct FoundJson<'a> {
    roots: Vec<Json<'a>>,
    /// Where the JSON found in the text stands in it.
    span: Option<(usize, usize)>,
}

impl<'a> SignalJson<'a> {
    pub(crate) fn new(signal: &'a Signal<'_>) -> SignalJson<'a> {
        SignalJson {
            text: &signal.text,
            acp_error: signal.acp_error,
            spaced: &signal.spaced,
            found: OnceCell::new(),
        }
    }

    fn found(&self) -> &FoundJson<'a> {
        self.found.get_or_init(|| {
            let mut roots: Vec<Json<'a>> = self.acp_error.map(acp_error_root).into_iter().collect();
            let found = embedded::embedded_json_at(self.text, self.spaced);
            let span = found.as_ref().map(|(span, _)| *span);
            roots.extend(found.map(|(_, v)| v));
            let nested: Vec<Json<'static>> = roots.iter().flat_map(embedded::nested_roots).collect();
            roots.extend(nested);
            FoundJson { roots, span }
        })
    }

    /// The JSON roots of this signal (see above).
    pub(crate) fn roots(&self) -> impl Iterator<Item = &Json<'a>> {
        self.found().roots.iter()
    }

    /// The byte range of the JSON object found in the text, if any (finds it on first use).
    pub(crate) fn embedded_span(&self) -> Option<(usize, usize)> {
        self.found().span
    }
}

/// Every string value inside a JSON value, in document order (bounded depth), except those
/// a credential names (`redact::names`: under a credential's key, after a credential's name
/// in a header pair, the `value` of an object whose `name` is a credential's). The text drops
/// the keys and the brackets, so redaction could not see the context that names them (rules'
/// JSON conditions still read them).
fn leaf_strings<'v>(v: &'v Value, out: &mut Vec<&'v str>, depth: usize) {
    if depth > 16 {
        return;
    }
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                if !redact::names::credential_element(a, i) {
                    leaf_strings(x, out, depth + 1);
                }
            }
        }
        Value::Object(o) => o
            .iter()
            .filter(|(k, _)| !redact::names::credential_member(o, k))
            .for_each(|(_, x)| leaf_strings(x, out, depth + 1)),
        _ => {}
    }
}

/// What a rule sees while matching one signal.
pub(crate) struct MatchCtx<'a, 'j> {
    pub(crate) envelope: &'a Envelope<'a>,
    pub(crate) signal: &'a Signal<'a>,
    /// The catalogue literals found in the text, with where each first occurs.
    pub(crate) found: &'a Found,
    /// The signal's JSON, read on first use.
    pub(crate) json: &'a SignalJson<'j>,
}

/// The literals one scan found in a signal's text: a bitset for the membership tests rules
/// make, and the (few) hits in order for first offsets and cheap resets. Clearing costs one
/// step per hit, not one per catalogue literal, and nothing is allocated per signal.
pub(crate) struct Found {
    bits: Vec<u64>,
    /// (literal, first byte offset), in the order first found.
    hits: Vec<(usize, usize)>,
}

impl Found {
    pub(crate) fn new(literals: usize) -> Found {
        Found {
            bits: vec![0; literals.div_ceil(64)],
            hits: Vec::with_capacity(16),
        }
    }

    fn clear(&mut self) {
        for &(i, _) in &self.hits {
            if let Some(w) = self.bits.get_mut(i / 64) {
                *w &= !(1 << (i % 64));
            }
        }
        self.hits.clear();
    }

    /// Records literal `i` at `pos` unless it was already found: callers report occurrences
    /// in order of their offsets, so the first one counts.
    pub(crate) fn insert(&mut self, i: usize, pos: usize) {
        if let Some(w) = self.bits.get_mut(i / 64) {
            let bit = 1 << (i % 64);
            if *w & bit == 0 {
                *w |= bit;
                self.hits.push((i, pos));
            }
        }
    }

    /// Whether literal `i` occurs in the text.
    pub(crate) fn has(&self, i: usize) -> bool {
        self.bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The first byte offset of literal `i` in the text, if it occurs.
    pub(crate) fn pos(&self, i: usize) -> Option<usize> {
        if !self.has(i) {
            return None;
        }
        self.hits.iter().find(|h| h.0 == i).map(|h| h.1)
    }

    fn literals(&self) -> impl Iterator<Item = usize> + '_ {
        self.hits.iter().map(|h| h.0)
    }

    /// How many distinct literals were found.
    pub(crate) fn distinct(&self) -> usize {
        self.hits.len()
    }
}

/// Visits the values at `segs` under `v` (keys apply to each element of an array); returns
/// true as soon as `pred` accepts one. Scalars are compared as their text.
pub(crate) fn json_any(
    v: &Json<'_>,
    segs: &[crate::catalogue::Seg],
    pred: &mut dyn FnMut(&str) -> bool,
) -> bool {
    use crate::catalogue::Seg;
    let Some((first, rest)) = segs.split_first() else {
        return match v {
            Json::String(s) => pred(s),
            Json::Number(n) => pred(&n.to_string()),
            Json::Bool(b) => pred(if *b { "true" } else { "false" }),
            Json::Array(a) => a.iter().any(|x| json_any(x, &[], pred)),
            _ => false,
        };
    };
    match (first, v) {
        (Seg::Key(k), Json::Object(_)) => v.get(k).is_some_and(|x| json_any(x, rest, pred)),
        (Seg::Key(_), Json::Array(a)) => a.iter().any(|x| json_any(x, segs, pred)),
        (Seg::Index(i), Json::Array(a)) => a.get(*i).is_some_and(|x| json_any(x, rest, pred)),
        (Seg::Any, Json::Array(a)) => a.iter().any(|x| json_any(x, rest, pred)),
        (Seg::Any, Json::Object(_)) => v.any_value(|x| json_any(x, rest, pred)),
        _ => false,
    }
}

/// The buffers matching reuses from one envelope to the next (per thread): the literals found
/// and the candidate rules. Taken for one classification and given back after it, so a
/// classification never sees another's state (it resets both before each signal anyway).
struct Scratch {
    found: Found,
    candidates: Vec<usize>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

impl Scratch {
    /// This thread's buffers if they fit a catalogue of `literals` literals, else new ones.
    fn take(literals: usize) -> Scratch {
        match SCRATCH.try_with(std::cell::Cell::take) {
            Ok(Some(s)) if s.found.bits.len() == literals.div_ceil(64) => s,
            _ => Scratch {
                found: Found::new(literals),
                candidates: Vec::with_capacity(32),
            },
        }
    }

    fn give_back(self) {
        // During thread teardown there is nowhere to keep them: they are dropped.
        let _ = SCRATCH.try_with(|c| c.set(Some(self)));
    }
}

/// Per-signal result of matching.
#[derive(Debug, Clone)]
enum SignalMatch {
    None,
    Won { rule: usize, tier: Tier },
    Conflict { tier: Tier },
}

/// Cuts the envelope into signals, in evidence order.
fn signals<'a>(env: &'a Envelope<'a>) -> Vec<Signal<'a>> {
    // At most one signal per stderr line, about one per other item: allocate once.
    let lines: usize = env
        .items
        .iter()
        .map(|i| match i {
            EvidenceItem::Stderr(s) => s.lines.len(),
            _ => 3,
        })
        .sum();
    let mut out = Vec::with_capacity(lines);
    for item in &env.items {
        match item {
            EvidenceItem::Http(h) => {
                let mut s = Signal::new(SignalKind::Http, Cow::Borrowed(h.body.as_deref().unwrap_or("")));
                s.status = h.status;
                s.headers = Some(&h.headers);
                out.push(s);
            }
            EvidenceItem::AcpError(e) => out.push(acp_error_signal(e)),
            EvidenceItem::AcpUpdates(u) => {
                let mut run: Option<String> = None;
                for (i, up) in u.updates.iter().enumerate() {
                    match up {
                        AcpUpdate::AgentMessageChunk { text } => run
                            .get_or_insert_with(|| String::with_capacity(run_len(&u.updates[i..])))
                            .push_str(text),
                        // Thoughts do not break a message run; anything else does.
                        AcpUpdate::AgentThoughtChunk { .. } => {}
                        _ => {
                            if let Some(t) = run.take() {
                                out.push(Signal::new(SignalKind::AcpMessage, Cow::Owned(t)));
                            }
                        }
                    }
                }
                if let Some(t) = run.take() {
                    out.push(Signal::new(SignalKind::AcpMessage, Cow::Owned(t)));
                }
                if let Some(e) = &u.prompt_error {
                    out.push(acp_error_signal(e));
                }
                if let Some(r) = &u.stop_reason {
                    let mut s = Signal::new(SignalKind::AcpResult, Cow::Borrowed(""));
                    s.stop_reason = Some(r);
                    s.zero_usage = u.usage_tokens == Some(0);
                    out.push(s);
                }
            }
            EvidenceItem::Stderr(s) => {
                for entry in stderr::entries(&s.lines) {
                    out.push(Signal::new(SignalKind::Stderr, entry));
                }
            }
            EvidenceItem::ProcessExit(p) => {
                let mut s = Signal::new(SignalKind::Exit, Cow::Borrowed(""));
                s.exit_code = p.code;
                s.exit_signal = p.signal.as_deref();
                out.push(s);
            }
        }
    }
    out
}

/// The length of the message run starting at `updates[0]`, so it is joined in one allocation.
fn run_len(updates: &[AcpUpdate]) -> usize {
    updates
        .iter()
        .map_while(|u| match u {
            AcpUpdate::AgentMessageChunk { text } => Some(text.len()),
            AcpUpdate::AgentThoughtChunk { .. } => Some(0),
            _ => None,
        })
        .sum()
}

fn acp_error_signal<'a>(e: &'a AcpErrorEvidence<'a>) -> Signal<'a> {
    // The text is the message plus every string inside `data`: adapters nest the agent's own
    // error text (often itself JSON) in `data.details`, and rules read it as text.
    let message = e.message.as_deref().unwrap_or_default();
    let mut strings = Vec::new();
    if let Some(d) = &e.data {
        leaf_strings(d, &mut strings, 0);
    }
    let text = if strings.is_empty() {
        Cow::Borrowed(message)
    } else {
        let mut text =
            String::with_capacity(message.len() + strings.iter().map(|s| s.len() + 1).sum::<usize>());
        text.push_str(message);
        for s in strings {
            text.push('\n');
            text.push_str(s);
        }
        Cow::Owned(text)
    };
    let mut s = Signal::new(SignalKind::AcpError, text);
    s.rpc_code = e.code;
    s.acp_error = Some(e);
    s
}

/// The ACP error as one JSON object (`code`, `message`, `data`), for JSON conditions.
fn acp_error_root<'a>(e: &'a AcpErrorEvidence<'a>) -> Json<'a> {
    let mut obj = Vec::with_capacity(3);
    if let Some(c) = e.code {
        obj.push((Cow::Borrowed("code"), Json::Number(c.into())));
    }
    if let Some(m) = &e.message {
        obj.push((Cow::Borrowed("message"), Json::String(Cow::Borrowed(m))));
    }
    if let Some(d) = &e.data {
        obj.push((Cow::Borrowed("data"), Json::borrow(d)));
    }
    Json::Object(obj)
}

impl Catalogue {
    /// Classifies one envelope with this catalogue. `now` validates timing hints (see
    /// `crate::timing`); nothing here reads a clock.
    pub fn classify(&self, env: &Envelope, now: DateTime<Utc>) -> Verdict {
        let sigs = signals(env);
        // Per signal, the JSON rules read (found on first use); kept here so the JSON can
        // borrow the signal.
        let json: Vec<SignalJson<'_>> = sigs.iter().map(SignalJson::new).collect();
        let mut matches = Vec::with_capacity(sigs.len());
        let mut extents = Vec::with_capacity(sigs.len());
        let Scratch {
            mut found,
            mut candidates,
        } = Scratch::take(self.literals.len());
        for (s, sj) in sigs.iter().zip(&json) {
            // Reset only what the previous signal set.
            found.clear();
            self.scanner.scan(s.text.as_bytes(), &mut found);
            // Candidate rules: those a found literal triggers, plus those without triggers.
            // The resolution below does not depend on their order.
            candidates.clear();
            candidates.extend_from_slice(&self.untriggered[s.kind.index()]);
            let kind = 1u8 << s.kind.index();
            for h in found.literals() {
                candidates.extend(
                    self.triggers[h]
                        .iter()
                        .filter(|&&(_, kinds)| kinds & kind != 0)
                        .map(|&(r, _)| r),
                );
            }
            candidates.sort_unstable();
            candidates.dedup();
            let ctx = MatchCtx {
                envelope: env,
                signal: s,
                found: &found,
                json: sj,
            };
            let m = self.match_signal(&ctx, &candidates);
            // Only a message run needs to know where its failure starts and which of its text
            // is the agent's own notice (see `combine_effects`).
            extents.push(if s.kind == SignalKind::AcpMessage {
                self.run_extent(&ctx, &m, &candidates)
            } else {
                RunExtent::default()
            });
            matches.push(m);
        }
        Scratch::give_back(Scratch { found, candidates });

        let effects = combine_effects(env, &sigs, &matches, &extents);
        let base = self.base_classification(env);

        let top = matches
            .iter()
            .filter_map(|m| match m {
                SignalMatch::Won { tier, .. } | SignalMatch::Conflict { tier } => Some(*tier),
                SignalMatch::None => None,
            })
            .max();
        let mut winner: Option<(usize, usize)> = None; // (signal, rule)
        let mut conflicting = false;
        // The first signal at the deciding tier whose rule has low confidence.
        let mut doubt: Option<(usize, usize)> = None;
        if let Some(top) = top {
            for (si, m) in matches.iter().enumerate() {
                if let SignalMatch::Won { rule, tier } = m {
                    if *tier == top && doubt.is_none() && self.rules[*rule].confidence == Confidence::Low {
                        doubt = Some((si, *rule));
                    }
                }
                match m {
                    SignalMatch::Conflict { tier } if *tier == top => conflicting = true,
                    SignalMatch::Won { rule, tier } if *tier == top => match winner {
                        None => winner = Some((si, *rule)),
                        Some((_, w)) => {
                            if self.rules[w].outcome != self.rules[*rule].outcome {
                                conflicting = true;
                            } else if self.rules[*rule].confidence > self.rules[w].confidence {
                                winner = Some((si, *rule));
                            }
                        }
                    },
                    _ => {}
                }
            }
        }

        // Signals that agree with a doubtful one are its symptoms, not its explanation (an ACP
        // transport loss beside an unrequested SIGKILL or an opaque exit): the doubt decides.
        if !conflicting && doubt.is_some() {
            winner = doubt;
        }

        let excerpt_signal = winner.map(|(s, _)| s).or_else(|| fallback_excerpt_signal(&sigs));
        let mut c = base;
        c.safe_excerpt = excerpt_signal.and_then(|i| {
            // A stderr entry's excerpt is redacted knowing the entry above it (a secret wrapped
            // over two lines).
            let before = i
                .checked_sub(1)
                .map(|p| &sigs[p])
                .filter(|p| p.kind == SignalKind::Stderr && sigs[i].kind == SignalKind::Stderr);
            excerpt(
                &sigs[i],
                before.map_or("", |p| p.printed.as_deref().unwrap_or(&p.text)),
            )
        });

        let unclassified = |c: &mut Classification, reason: UnclassifiedReason| {
            c.code = None;
            c.class = ClassState::Unclassified;
            c.reason = Some(reason);
        };
        if env.is_stale() {
            unclassified(&mut c, UnclassifiedReason::Stale);
        } else if conflicting {
            unclassified(&mut c, UnclassifiedReason::Conflicting);
        } else if let Some((si, ri)) = winner {
            let rule = &self.rules[ri];
            c.classifier_rule = Some(rule.id.clone());
            c.confidence = rule.confidence;
            match rule.outcome {
                Outcome::NotProviderError => unclassified(&mut c, UnclassifiedReason::NotProviderError),
                Outcome::Code(_) if rule.confidence == Confidence::Low => {
                    c.confidence = Confidence::Low;
                    unclassified(&mut c, UnclassifiedReason::LowConfidence)
                }
                Outcome::Code(code) => {
                    let base_time = env.occurred_at.unwrap_or(now);
                    let hint = rule
                        .timing
                        .iter()
                        .find_map(|x| x.extract_with(&sigs[si], &json[si], base_time, now));
                    let code = promote(code, hint.as_ref());
                    c.code = Some(code);
                    c.class = code.class().into();
                    c.reason = None;
                    c.scope = rule.scope;
                    if let Some(h) = hint {
                        c.retry_after_seconds = Some(h.retry_after_seconds);
                        c.reset_at = Some(h.reset_at);
                    }
                }
            }
        } else {
            unclassified(&mut c, UnclassifiedReason::NoMatch);
        }
        let gate = gate::decide(env, &c, &effects);
        Verdict {
            classification: c,
            gate,
            effects,
            truncated: env.truncated,
        }
    }

    fn match_signal(&self, ctx: &MatchCtx<'_, '_>, candidates: &[usize]) -> SignalMatch {
        let mut best: Option<(usize, Tier)> = None;
        let mut conflict = false;
        for &ri in candidates {
            let r = &self.rules[ri];
            if best.is_some_and(|(_, t)| r.tier < t) {
                continue;
            }
            if !r.matches(ctx) {
                continue;
            }
            match best {
                Some((b, t)) if t == r.tier => {
                    let br = &self.rules[b];
                    if br.outcome != r.outcome {
                        conflict = true;
                    } else if (r.confidence, std::cmp::Reverse(&r.id))
                        > (br.confidence, std::cmp::Reverse(&br.id))
                    {
                        best = Some((ri, r.tier));
                    }
                }
                _ => {
                    // A higher tier (or the first match) resets any conflict of a lower tier.
                    conflict = false;
                    best = Some((ri, r.tier));
                }
            }
        }
        match best {
            None => SignalMatch::None,
            Some((_, tier)) if conflict => SignalMatch::Conflict { tier },
            Some((rule, tier)) => SignalMatch::Won { rule, tier },
        }
    }

    /// Which text of a message run can be real output: what comes before the line its failure
    /// starts on (all of it when nothing or a notice matched), except the agents' notices in it.
    fn run_extent(&self, ctx: &MatchCtx<'_, '_>, m: &SignalMatch, candidates: &[usize]) -> RunExtent {
        let text = &ctx.signal.text;
        let cutoff = match m {
            SignalMatch::Won { rule, .. } if !self.rules[*rule].notice => {
                let start = self.rules[*rule].match_start(ctx).unwrap_or(0).min(text.len());
                memchr::memrchr(b'\n', &text.as_bytes()[..start]).map_or(0, |i| i + 1)
            }
            _ => text.len(),
        };
        let mut notices: Vec<(usize, usize)> = candidates
            .iter()
            .map(|&ri| &self.rules[ri])
            .filter(|r| r.notice && r.matches(ctx))
            .flat_map(|r| r.regex.iter().flat_map(|re| re.get().find_iter(text)))
            .map(|f| (f.start(), f.end()))
            .collect();
        notices.sort_unstable();
        RunExtent { cutoff, notices }
    }

    fn base_classification(&self, env: &Envelope) -> Classification {
        Classification {
            code: None,
            class: ClassState::Unclassified,
            reason: None,
            catalogue_version: self.version().to_owned(),
            confidence: Confidence::Low,
            scope: None,
            classifier_rule: None,
            provider_id: env.provider_id.as_deref().map(redact::identifier),
            model_id: env.model_id.as_deref().map(redact::identifier),
            phase: env.phase,
            occurred_at: env.occurred_at,
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }
}

/// The rate-limit/quota rule: a rate limit is transient only while it is short.
fn promote(code: SemanticCode, hint: Option<&Hint>) -> SemanticCode {
    match (code, hint) {
        (SemanticCode::RateLimited, Some(h)) if h.retry_after_seconds > SHORT_RATE_LIMIT_SECS => {
            SemanticCode::QuotaLimited
        }
        _ => code,
    }
}

/// The part of a message run that can be real output (see `Catalogue::run_extent`).
#[derive(Default)]
struct RunExtent {
    /// Text from here on is the failure's (its line and after).
    cutoff: usize,
    /// The agents' notices in the run (byte ranges, sorted): not output.
    notices: Vec<(usize, usize)>,
}

impl RunExtent {
    /// Whether `text` has non-blank text before the cutoff outside the notices.
    fn has_output(&self, text: &str) -> bool {
        let cutoff = self.cutoff.min(text.len());
        let mut at = 0;
        for &(start, end) in &self.notices {
            if start >= cutoff {
                break;
            }
            if start > at && !text[at..start].trim().is_empty() {
                return true;
            }
            at = at.max(end);
        }
        at < cutoff && !text[at..cutoff].trim().is_empty()
    }
}

/// Adapter effects OR derived ones. A message run is a failure signal when a rule matched it;
/// non-blank text before the matched evidence, or in a run nothing matched, is real output,
/// except an agent's notice (a rule marked `notice`). A conflicting run counts as none: the
/// verdict is unclassified anyway, and the gate refuses it.
fn combine_effects(
    env: &Envelope,
    sigs: &[Signal<'_>],
    matches: &[SignalMatch],
    extents: &[RunExtent],
) -> Effects {
    let mut e = env.effects;
    e.tool_activity |= env.derived.tool_activity;
    for ((s, m), extent) in sigs.iter().zip(matches).zip(extents) {
        if s.kind != SignalKind::AcpMessage {
            continue;
        }
        e.assistant_output |= match m {
            SignalMatch::Conflict { .. } => false,
            SignalMatch::None | SignalMatch::Won { .. } => extent.has_output(&s.text),
        };
    }
    // The agent answered this prompt (an update, a result or a prompt error came back), so
    // the prompt was delivered, whatever the adapter believed.
    if env.derived.delivered {
        e.prompt_delivery = PromptDelivery::Confirmed;
    }
    e
}

fn fallback_excerpt_signal(sigs: &[Signal<'_>]) -> Option<usize> {
    const ORDER: [SignalKind; 5] = [
        SignalKind::AcpError,
        SignalKind::Http,
        SignalKind::Stderr,
        SignalKind::AcpMessage,
        SignalKind::Exit,
    ];
    ORDER.iter().find_map(|k| {
        let mut candidates = sigs.iter().enumerate().filter(|(_, s)| s.kind == *k);
        if *k == SignalKind::Stderr || *k == SignalKind::AcpMessage {
            // The last non-blank one.
            candidates
                .rfind(|(_, s)| !s.text.trim().is_empty())
                .map(|(i, _)| i)
        } else {
            candidates
                .find(|(_, s)| !s.text.trim().is_empty() || s.kind == SignalKind::Exit)
                .map(|(i, _)| i)
        }
    })
}

fn excerpt(s: &Signal<'_>, before: &str) -> Option<String> {
    // As the agent printed it: redaction reads the lines (see `crate::normalize`).
    let printed = s.printed.as_deref().unwrap_or(&s.text);
    // Only the start of the evidence can reach the excerpt; do not copy the rest.
    let mut end = printed.len().min(redact::REDACT_WINDOW_BYTES + 64);
    while !printed.is_char_boundary(end) {
        end -= 1;
    }
    let head = &printed[..end];
    // `prefixed` rather than `format!`: this runs for every envelope, and the formatting
    // machinery costs more than the copy.
    let text: Cow<'_, str> = match s.kind {
        SignalKind::Http => match s.status {
            Some(st) => Cow::Owned(prefixed("HTTP ", i64::from(st), head)),
            None => Cow::Borrowed(head),
        },
        SignalKind::AcpError => match s.rpc_code {
            Some(c) => Cow::Owned(prefixed("JSON-RPC ", c, head)),
            None => Cow::Borrowed(head),
        },
        SignalKind::Exit => Cow::Owned(match (s.exit_code, s.exit_signal) {
            (_, Some(sig)) => format!("process killed by {sig}"),
            (Some(c), None) => format!("process exited with code {c}"),
            (None, None) => "process exited".to_owned(),
        }),
        SignalKind::AcpResult => Cow::Owned(format!("stopReason: {}", s.stop_reason.unwrap_or("?"))),
        _ => Cow::Borrowed(head),
    };
    let e = redact::safe_excerpt_after(before, &text);
    (!e.is_empty()).then_some(e)
}

/// `{label}{n}: {text}`, as `format!` would write it.
fn prefixed(label: &str, n: i64, text: &str) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut out = String::with_capacity(label.len() + 22 + text.len());
    out.push_str(label);
    if n < 0 {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
    out.push_str(": ");
    out.push_str(text);
    out
}

#[cfg(test)]
mod tests {
    use super::prefixed;
    use crate::{Catalogue, Envelope};
    use chrono::{DateTime, Utc};
    use policy::classification::ClassState;
    use serde_json::json;

    const NOTICE: &str = r#"
[[rule]]
id = "t.notice"
tier = "broad"
code = "not_provider_error"
confidence = "high"
notice = true
kinds = ["acp_message"]
contains = ["Model metadata for"]
regex = 'Model metadata for `[^`]+` not found\.'

[[rule]]
id = "t.quota"
tier = "exact"
code = "quota_limited"
confidence = "high"
kinds = ["acp_error", "acp_message"]
contains = ["quota exhausted"]

[[rule]]
id = "t.done"
tier = "broad"
code = "not_provider_error"
confidence = "high"
kinds = ["acp_result"]
stop_reason = ["end_turn"]
zero_usage = false

[[rule]]
id = "t.no-tokens"
tier = "broad"
code = "provider_unavailable"
confidence = "medium"
kinds = ["acp_result"]
stop_reason = ["end_turn"]
zero_usage = true
"#;

    fn verdict(chunks: &[&str], end: serde_json::Value) -> crate::Verdict {
        let cat = Catalogue::from_str(NOTICE).expect("compiles");
        let updates: Vec<_> = chunks
            .iter()
            .map(|t| json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": t}}))
            .collect();
        let mut item = json!({"kind": "acp_updates", "updates": updates});
        item.as_object_mut()
            .expect("object")
            .extend(end.as_object().expect("object").clone());
        let doc = json!({ "items": [item] });
        let env = Envelope::from_value(&doc).expect("envelope");
        let now: DateTime<Utc> = "2026-11-30T08:00:00Z".parse().expect("time");
        cat.classify(&env, now)
    }

    #[test]
    fn a_notice_is_not_output_but_text_around_it_is() {
        let notice = "Model metadata for `m-1` not found.";
        let error = json!({"prompt_error": {"code": -32603, "message": "quota exhausted"}});
        // The notice alone: a failure after it may be retried.
        let v = verdict(&[notice], error.clone());
        assert_eq!(v.classification.classifier_rule.as_deref(), Some("t.quota"));
        assert!(!v.effects.assistant_output);
        assert!(v.gate.automatic_recovery);
        // Text after it, glued in the same run, or before it, is output.
        for chunks in [
            &[notice, "Let me "][..],
            &["Let me ", notice][..],
            &[notice, " ", notice, "x"][..],
        ] {
            let v = verdict(chunks, error.clone());
            assert!(v.effects.assistant_output, "{chunks:?}");
            assert!(!v.gate.automatic_recovery, "{chunks:?}");
        }
        // Twice, with blanks between: still no output.
        assert!(!verdict(&[notice, "\n", notice], error).effects.assistant_output);
        // A turn that ends normally after the notice and an answer is a success.
        let v = verdict(
            &[notice, "Hello."],
            json!({"prompt_result": {"stopReason": "end_turn"}}),
        );
        assert_eq!(v.classification.class, ClassState::Unclassified);
        assert_eq!(v.classification.classifier_rule.as_deref(), Some("t.notice"));
        assert!(v.effects.assistant_output);
        assert!(!v.signals_failure(), "an answer");
    }

    #[test]
    fn an_end_turn_that_used_no_tokens_is_not_a_success() {
        let ended = |usage: serde_json::Value| {
            verdict(
                &["Let me "],
                json!({"prompt_result": {"stopReason": "end_turn", "usage": usage}}),
            )
        };
        let v = ended(json!({"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}));
        assert_eq!(v.classification.classifier_rule.as_deref(), Some("t.no-tokens"));
        assert_eq!(v.classification.class, ClassState::Transient);
        assert!(v.effects.assistant_output && !v.gate.automatic_recovery);
        assert!(v.signals_failure(), "a turn that used no tokens failed");
        for answered in [json!({"totalTokens": 32}), json!(null), json!({"cost": 0})] {
            let v = ended(answered.clone());
            assert_eq!(
                v.classification.classifier_rule.as_deref(),
                Some("t.done"),
                "{answered}"
            );
            assert!(!v.signals_failure(), "{answered}");
        }
    }

    #[test]
    fn a_provider_failure_told_as_a_message_in_a_turn_that_ended_normally_signals_failure() {
        let v = verdict(
            &["quota exhausted"],
            json!({"prompt_result": {"stopReason": "end_turn"}}),
        );
        assert_eq!(v.classification.classifier_rule.as_deref(), Some("t.quota"));
        assert!(v.signals_failure());
    }

    #[test]
    fn prefixed_writes_what_format_writes() {
        for n in [0, 7, -1, 429, 65_535, -32_603, i64::MAX, i64::MIN] {
            assert_eq!(prefixed("HTTP ", n, "body"), format!("HTTP {n}: body"));
        }
    }
}
