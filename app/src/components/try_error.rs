//! "Try an error", in the profile editor: paste what a provider or an agent said (an HTTP
//! error body, an agent's stderr, an ACP error, or a whole evidence envelope), or pick one of
//! the classifier catalogue's fixtures, and see, with nothing saved or sent:
//! - the classification the server's classifier makes of it now (code, class, confidence,
//!   rule, the timing hint as an absolute time, the redacted excerpt);
//! - the effect-safety gate, as given and had the attempt already shown output;
//! - what this editor's current, unsaved policy would do with it, step by step
//!   ([`policy::trial::preview`], the evaluator every route uses).
//!
//! The classification comes from the server (`api::evidence`), which reads the evidence as a
//! route's; the preview is played here on every edit of the policy, without asking again.

use crate::{
    api::evidence::{fixture_evidence, list_fixtures, TryEvidence},
    components::{
        controls::{FieldMessage, FOCUS},
        route_view::{class_label, describe_code},
        time::format_utc,
    },
    error::AppError,
};
use chrono::TimeDelta;
use leptos::prelude::*;
use policy::{
    classification::{Confidence, Gate, GateReason},
    document::ValidatedCandidatePolicy,
    limits::MAX_REQUEST_BODY_BYTES,
    trial::{preview, EvidenceTrial, Step, StepKind},
};
use serde_json::{json, Value};

/// What the pasted text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Http,
    Stderr,
    AcpError,
    Envelope,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Http, Kind::Stderr, Kind::AcpError, Kind::Envelope];

    const fn key(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Stderr => "stderr",
            Kind::AcpError => "acp_error",
            Kind::Envelope => "envelope",
        }
    }

    const fn label(self) -> &'static str {
        match self {
            Kind::Http => "A provider's error body (HTTP)",
            Kind::Stderr => "An agent's stderr",
            Kind::AcpError => "An ACP error message",
            Kind::Envelope => "An evidence envelope (JSON)",
        }
    }

    fn parse(key: &str) -> Kind {
        Kind::ALL
            .into_iter()
            .find(|k| k.key() == key)
            .unwrap_or(Kind::Http)
    }
}

/// The envelope for `text` read as `kind`; `status` is the HTTP status or the JSON-RPC code.
fn envelope(kind: Kind, text: &str, number: &str) -> Result<Value, String> {
    if text.len() > MAX_REQUEST_BODY_BYTES {
        return Err(format!(
            "That is more than {} KiB, which no route would accept either.",
            MAX_REQUEST_BODY_BYTES / 1024
        ));
    }
    if text.trim().is_empty() {
        return Err("Paste the error first, or pick a fixture.".to_owned());
    }
    let number = || -> Result<i64, String> {
        number
            .trim()
            .parse::<i64>()
            .map_err(|_| "Give a whole number.".to_owned())
    };
    Ok(match kind {
        Kind::Http => {
            let status = number()?;
            if !(100..=599).contains(&status) {
                return Err("An HTTP status is from 100 to 599.".to_owned());
            }
            json!({"items": [{"kind": "http", "status": status, "body": text}]})
        }
        Kind::Stderr => json!({"items": [{"kind": "stderr", "lines": text.lines().collect::<Vec<_>>()}]}),
        Kind::AcpError => json!({"items": [{"kind": "acp_error", "code": number()?, "message": text}]}),
        Kind::Envelope => crate::codec::value(text)
            .map_err(|_| "This is not JSON; choose another kind, or fix the envelope.".to_owned())?,
    })
}

/// The gate's answer in words.
fn gate_text(gate: Gate) -> String {
    match gate.reason {
        None if gate.automatic_recovery => "Automatic recovery may follow the policy.".to_owned(),
        reason => format!(
            "A person decides: {}.",
            match reason {
                Some(GateReason::Stale) => "the evidence belongs to an older attempt",
                Some(GateReason::Unclassified) => "the error is not recognised",
                Some(GateReason::AssistantOutput) =>
                    "the agent had already answered, so a retry could answer twice",
                Some(GateReason::ToolActivity) => "a tool had run, so a retry could repeat its work",
                Some(GateReason::PartialResult) => "part of a result had arrived",
                Some(GateReason::AmbiguousDelivery) => "it is unknown whether the prompt arrived",
                Some(GateReason::CancelRequested) => "the attempt was being cancelled",
                None => "the gate refused without a reason",
            }
        ),
    }
}

/// One preview step in words.
fn step_text(step: &Step) -> String {
    let at = format_utc(step.at);
    let c = &step.candidate;
    match step.kind {
        StepKind::WaitForReset => format!(
            "{at}: fails on {c}; wait for the reset until {}, then try {c} once more.",
            step.deadline.map(format_utc).unwrap_or_default()
        ),
        StepKind::Retry => format!(
            "{at}: fails on {c}; retry {} of {} at {}.",
            step.retry_ordinal.unwrap_or(0),
            step.max_retries,
            step.deadline.map(format_utc).unwrap_or_default()
        ),
        StepKind::Switch => {
            format!("{at}: fails on {c}; its recovery is used up: switch to the next candidate.")
        }
        StepKind::Stop => {
            format!("{at}: fails on {c}; its recovery is used up and its policy says Stop: a person decides.")
        }
        StepKind::Manual => {
            format!("{at}: fails on {c}; automatic recovery is not allowed: a person decides.")
        }
        StepKind::NoCandidateLeft => format!("{at}: no candidate is left in this cycle: a person decides."),
    }
}

const fn confidence_text(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    }
}

/// The panel. `candidates` is the editor's current policy, `None` while a field is invalid.
#[component]
pub fn TryError(#[prop(into)] candidates: Signal<Option<Vec<ValidatedCandidatePolicy>>>) -> impl IntoView {
    let kind = RwSignal::new(Kind::Http);
    let number = RwSignal::new("529".to_owned());
    let text = RwSignal::new(String::new());
    let problem: RwSignal<Option<String>> = RwSignal::new(None);
    let run = ServerAction::<TryEvidence>::new();
    // The fixtures are listed only once the person asks (the list is long).
    let want_fixtures = RwSignal::new(false);
    let fixtures = crate::codec::resource(
        move || want_fixtures.get(),
        |want| async move {
            if want {
                list_fixtures().await.map(Some)
            } else {
                Ok(None)
            }
        },
    );
    let pick = Action::new(|name: &String| fixture_evidence(name.clone()));
    Effect::new(move |_| match pick.value().get() {
        Some(Ok(evidence)) => {
            kind.set(Kind::Envelope);
            text.set(serde_json::to_string_pretty(&evidence).unwrap_or_default());
            problem.set(None);
        }
        Some(Err(e)) => problem.set(Some(e.to_string())),
        None => {}
    });
    let on_try = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        match envelope(
            kind.get_untracked(),
            &text.get_untracked(),
            &number.get_untracked(),
        ) {
            Ok(envelope) => {
                problem.set(None);
                run.dispatch(TryEvidence { envelope });
            }
            Err(why) => problem.set(Some(why)),
        }
    };
    let number_label = move || match kind.get() {
        Kind::AcpError => Some("JSON-RPC error code"),
        Kind::Http => Some("HTTP status"),
        _ => None,
    };
    let input =
        format!("mt-1 h-11 w-full rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}");
    view! {
        <section aria-labelledby="try-error-heading" class="mt-8 rounded-lg border border-slate-300 bg-white p-4" data-testid="try-error">
            <h2 id="try-error-heading" class="text-lg font-semibold text-slate-900">"Try an error"</h2>
            <p class="mt-1 text-sm text-slate-700">
                "Paste what a provider or an agent said, or pick a fixture from the classifier's catalogue, and \
                 see how Recourse reads it and what this policy, as it is in the form above (saved or not), \
                 would do. Nothing is saved or sent to any provider."
            </p>
            <form on:submit=on_try novalidate class="mt-3 grid gap-3 sm:grid-cols-2">
                <div>
                    <label for="try-kind" class="block text-sm font-medium">"What it is"</label>
                    <select
                        id="try-kind"
                        class=input.clone()
                        prop:value=move || kind.get().key()
                        on:change=move |ev| {
                            let k = Kind::parse(&event_target_value(&ev));
                            number.set(if k == Kind::AcpError { "-32603".into() } else { "529".into() });
                            kind.set(k);
                        }
                    >
                        {Kind::ALL
                            .into_iter()
                            .map(|k| view! { <option value=k.key()>{k.label()}</option> })
                            .collect_view()}
                    </select>
                </div>
                <div hidden=move || number_label().is_none()>
                    <label for="try-number" class="block text-sm font-medium">{move || number_label().unwrap_or("Number")}</label>
                    <input
                        id="try-number"
                        type="text"
                        inputmode="numeric"
                        class=input.clone()
                        prop:value=move || number.get()
                        on:input=move |ev| number.set(event_target_value(&ev))
                    />
                </div>
                <div class="sm:col-span-2">
                    <label for="try-text" class="block text-sm font-medium">"The error"</label>
                    <textarea
                        id="try-text"
                        rows="6"
                        spellcheck="false"
                        class=format!("mt-1 w-full rounded-md border border-slate-400 bg-white p-3 font-mono text-sm {FOCUS}")
                        aria-describedby="try-problem"
                        prop:value=move || text.get()
                        on:input=move |ev| text.set(event_target_value(&ev))
                    ></textarea>
                    <FieldMessage id="try-problem" message=Signal::derive(move || problem.get()) />
                </div>
                <div class="sm:col-span-2 flex flex-wrap items-end gap-3">
                    <button
                        type="submit"
                        class=format!("min-h-11 rounded-md bg-indigo-700 px-4 text-sm font-semibold text-white disabled:bg-slate-500 {FOCUS}")
                        disabled=move || run.pending().get()
                    >
                        {move || if run.pending().get() { "Reading it…" } else { "Try it" }}
                    </button>
                    <Show
                        when=move || want_fixtures.get()
                        fallback=move || view! {
                            <button
                                type="button"
                                class=format!("min-h-11 rounded-md border border-slate-400 bg-white px-4 text-sm font-medium text-slate-900 {FOCUS}")
                                on:click=move |_| want_fixtures.set(true)
                            >
                                "Pick a catalogue fixture"
                            </button>
                        }
                    >
                        <Transition fallback=|| view! { <span class="text-sm">"Loading the fixtures…"</span> }>
                            {move || Suspend::new(async move {
                                match fixtures.await {
                                    Ok(Some(names)) => view! {
                                        <div class="min-w-0 flex-1">
                                            <label for="try-fixture" class="block text-sm font-medium">"Catalogue fixture"</label>
                                            <select
                                                id="try-fixture"
                                                class=format!("mt-1 h-11 w-full max-w-full rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}")
                                                on:change=move |ev| {
                                                    let name = event_target_value(&ev);
                                                    if !name.is_empty() {
                                                        pick.dispatch(name);
                                                    }
                                                }
                                            >
                                                <option value="">"Choose one…"</option>
                                                {names
                                                    .into_iter()
                                                    .map(|n| {
                                                        let label = n.clone();
                                                        view! { <option value=n>{label}</option> }
                                                    })
                                                    .collect_view()}
                                            </select>
                                        </div>
                                    }.into_any(),
                                    Ok(None) => ().into_any(),
                                    Err(e) => view! { <p role="alert" class="text-sm text-red-700">{e.to_string()}</p> }.into_any(),
                                }
                            })}
                        </Transition>
                    </Show>
                </div>
            </form>
            <div aria-live="polite">
                {move || run.value().get().map(|result| match result {
                    Ok(trial) => view! { <TrialView trial=trial candidates=candidates /> }.into_any(),
                    Err(AppError::Invalid { errors }) => {
                        let message = errors.into_iter().map(|e| e.message).collect::<Vec<_>>().join(" ");
                        view! { <p role="alert" class="mt-3 text-sm font-medium text-red-700">{message}</p> }.into_any()
                    }
                    Err(e) => view! { <p role="alert" class="mt-3 text-sm font-medium text-red-700">{e.to_string()}</p> }.into_any(),
                })}
            </div>
        </section>
    }
}

/// The server's reading of the evidence, and the policy played against it.
#[component]
fn TrialView(
    trial: EvidenceTrial,
    candidates: Signal<Option<Vec<ValidatedCandidatePolicy>>>,
) -> impl IntoView {
    let c = trial.classification.clone();
    let code = c.code.map_or("unclassified", |c| c.as_str());
    let hint = match (c.reset_at, c.retry_after_seconds) {
        (Some(at), _) => format!("a trusted reset at {}", format_utc(at)),
        (None, Some(secs)) => format!(
            "retry after {} (at {})",
            policy::schedule::format_duration(secs),
            format_utc(trial.classified_at + TimeDelta::seconds(i64::try_from(secs).unwrap_or(i64::MAX / 2)))
        ),
        (None, None) => "none".to_owned(),
    };
    let stored = StoredValue::new(trial.clone());
    let steps = move || {
        candidates
            .get()
            .map(|cands| stored.with_value(|t| preview(&t.classification, t.gate, &cands, t.classified_at)))
    };
    view! {
        <div class="mt-4 space-y-4">
            <section aria-labelledby="trial-class-heading">
                <h3 id="trial-class-heading" class="text-base font-semibold">"How Recourse reads it"</h3>
                <dl class="mt-1 grid grid-cols-1 gap-x-3 gap-y-0.5 text-sm sm:grid-cols-[auto_1fr]">
                    <dt class="font-medium">"Cause"</dt>
                    <dd data-testid="trial-code">
                        {describe_code(code)} " "
                        <code class="break-all rounded bg-slate-100 px-1 text-xs">{code}</code>
                    </dd>
                    <dt class="font-medium">"Class"</dt>
                    <dd data-testid="trial-class">{class_label(c.class)}</dd>
                    <dt class="font-medium">"Confidence"</dt>
                    <dd>{confidence_text(c.confidence)}</dd>
                    <dt class="font-medium">"Rule"</dt>
                    <dd class="break-all" data-testid="trial-rule">
                        {c.classifier_rule.clone().unwrap_or_else(|| "none matched".to_owned())}
                        {format!(" (catalogue {})", c.catalogue_version)}
                    </dd>
                    <dt class="font-medium">"Timing hint"</dt>
                    <dd data-testid="trial-hint">{hint}</dd>
                    {c.safe_excerpt.clone().map(|e| view! {
                        <dt class="font-medium">"What it said (redacted)"</dt>
                        <dd><code class="block whitespace-pre-wrap break-all rounded bg-slate-100 p-2 text-xs" data-testid="trial-excerpt">{e}</code></dd>
                    })}
                </dl>
                {trial.truncated.then(|| view! {
                    <p class="mt-1 text-sm text-amber-900">"It was longer than evidence may be, so only its first part was read."</p>
                })}
                <p class="mt-1 text-xs text-slate-600">{format!("Read at {} on the server's clock.", format_utc(trial.classified_at))}</p>
            </section>
            <section aria-labelledby="trial-gate-heading">
                <h3 id="trial-gate-heading" class="text-base font-semibold">"Whether it may recover on its own"</h3>
                <dl class="mt-1 grid grid-cols-1 gap-x-3 gap-y-0.5 text-sm sm:grid-cols-[auto_1fr]" data-testid="trial-gate">
                    <dt class="font-medium">"Before any output"</dt>
                    <dd data-testid="trial-gate-before">{gate_text(trial.gate)}</dd>
                    <dt class="font-medium">"After the agent answered"</dt>
                    <dd data-testid="trial-gate-after">{gate_text(trial.gate_after_output)}</dd>
                </dl>
            </section>
            <section aria-labelledby="trial-steps-heading">
                <h3 id="trial-steps-heading" class="text-base font-semibold">"What this policy would do"</h3>
                <p class="text-sm text-slate-700">
                    "If it happened now, before any output, and every attempt failed the same way:"
                </p>
                {move || match steps() {
                    Some(steps) => view! {
                        <ol class="mt-1 list-decimal space-y-1 pl-6 text-sm" data-testid="trial-steps">
                            {steps.iter().map(|s| view! { <li data-step=step_key(s.kind)>{step_text(s)}</li> }).collect_view()}
                        </ol>
                    }.into_any(),
                    None => view! {
                        <p class="mt-1 text-sm text-amber-900" data-testid="trial-steps">
                            "Some values in the form above need fixing first; then the steps appear here."
                        </p>
                    }.into_any(),
                }}
            </section>
        </div>
    }
}

const fn step_key(kind: StepKind) -> &'static str {
    match kind {
        StepKind::WaitForReset => "wait",
        StepKind::Retry => "retry",
        StepKind::Switch => "switch",
        StepKind::Stop => "stop",
        StepKind::Manual => "manual",
        StepKind::NoCandidateLeft => "none-left",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasted_text_becomes_the_envelope_a_route_would_get() {
        assert_eq!(
            envelope(Kind::Http, "{\"error\":1}", "429").unwrap(),
            json!({"items": [{"kind": "http", "status": 429, "body": "{\"error\":1}"}]})
        );
        assert_eq!(
            envelope(Kind::Stderr, "a\nb", "").unwrap(),
            json!({"items": [{"kind": "stderr", "lines": ["a", "b"]}]})
        );
        assert_eq!(
            envelope(Kind::AcpError, "Internal error", "-32603").unwrap(),
            json!({"items": [{"kind": "acp_error", "code": -32603, "message": "Internal error"}]})
        );
        assert!(envelope(Kind::Http, "x", "42").is_err());
        assert!(envelope(Kind::Envelope, "not json", "").is_err());
        assert!(envelope(Kind::Stderr, "  ", "").is_err());
        assert!(envelope(Kind::Stderr, &"x".repeat(MAX_REQUEST_BODY_BYTES + 1), "").is_err());
    }
}
