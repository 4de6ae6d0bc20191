//! One class policy of one candidate: the section headed "Transient errors" or "Hard errors",
//! its plain-words explanation with the concrete codes as examples (visible text, never a
//! tooltip), the controls, and the schedule preview computed by `policy::schedule`, the same
//! code the server's evaluator uses.

use crate::{
    components::controls::{NumberField, Switch, FOCUS},
    draft::{ClassDraft, Unit},
};
use leptos::prelude::*;
use policy::{
    class::ErrorClass,
    document::{NumberField as Field, OnExhausted},
    schedule::{schedule_preview, wait_preview},
};

/// The class's meaning and its codes, described as a person would say them.
#[component]
pub fn ClassExplanation(class: ErrorClass) -> impl IntoView {
    view! {
        <p class="text-sm text-slate-700">{class.describe()}</p>
        <p class="mt-2 text-sm font-medium text-slate-900">"For example:"</p>
        <ul class="mt-1 space-y-1 text-sm text-slate-700">
            {class
                .codes()
                .map(|code| {
                    view! {
                        <li class="flex flex-wrap gap-x-2">
                            <span>{code.describe()}</span>
                            <code class="break-all rounded bg-slate-100 px-1 text-xs leading-5 text-slate-700">
                                {code.as_str()}
                            </code>
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
}

/// Where server messages for this section come from and go to.
#[derive(Clone, Copy)]
pub struct ServerMessages {
    /// The message the server gave for a document path, if any (tracked).
    pub get: Callback<String, Option<String>>,
    /// Forget the server's message for a path (the person edited the field).
    pub clear: Callback<String>,
}

/// The editor of one class policy. `prefix` makes element ids unique per candidate row;
/// `path` gives the document path of a field (`candidates[1].hard.retry.max_retries`).
#[component]
pub fn ClassPolicyEditor(
    draft: ClassDraft,
    #[prop(into)] prefix: String,
    path: Callback<&'static str, String>,
    messages: ServerMessages,
) -> impl IntoView {
    let class = draft.class;
    let id = {
        let prefix = prefix.clone();
        move |name: &str| format!("{prefix}-{}-{name}", class.as_str())
    };
    let heading_id = id("heading");
    let labelled_by = heading_id.clone();
    let preview_id = id("preview");

    // A field's message: the inline check first, else what the server said about it.
    let message = move |field: Field| {
        Signal::derive(move || match draft.check(field) {
            Err(e) => Some(e.message),
            Ok(_) => messages.get.run(path.run(field_rel(field))),
        })
    };
    let edited = move |field: Field| Callback::new(move |()| messages.clear.run(path.run(field_rel(field))));
    let outcome_message = Signal::derive(move || messages.get.run(path.run("on_exhausted")));
    let section_message = Signal::derive(move || messages.get.run(path.run("")));

    let preview = move || match draft.validated() {
        Some(p) => {
            let mut lines = Vec::with_capacity(2);
            if let Some(w) = wait_preview(&p) {
                lines.push(format!("On a trusted reset time: {w}."));
            }
            lines.push(format!("Otherwise: {}.", schedule_preview(&p)));
            lines.join(" ")
        }
        None => "Fix the marked values to see the schedule.".to_owned(),
    };

    let outcome_id = id("on-exhausted");
    let (retry_id, max_retries_id, interval_id) =
        (id("retry-enabled"), id("max-retries"), id("initial-interval"));
    let (wait_id, max_wait_id) = (id("wait-enabled"), id("max-wait"));
    view! {
        <section aria-labelledby=labelled_by class="min-w-0 rounded-lg border border-slate-200 bg-slate-50 p-4">
            <h3 id=heading_id class="text-base font-semibold text-slate-900">
                {class.label()}
            </h3>
            <div class="mt-1">
                <ClassExplanation class=class />
            </div>
            <p class="mt-2 text-sm font-medium text-red-700" hidden=move || section_message.with(Option::is_none)>
                {move || section_message.get().unwrap_or_default()}
            </p>

            <div class="mt-4 space-y-3">
                <Switch
                    id=retry_id
                    label="Retry the same candidate"
                    checked=draft.retry_enabled
                    on_change=Callback::new(move |on| {
                        draft.set_retry_enabled(on);
                        messages.clear.run(path.run("retry.enabled"));
                    })
                />
                <Show when=move || draft.retry_enabled.get()>
                    <div class="space-y-3 border-l-2 border-indigo-200 pl-3">
                        <NumberField
                            id=max_retries_id.clone()
                            label="Maximum retries"
                            hint="Additional attempts after the failed one, 1 to 10."
                            text=draft.max_retries
                            suffix="retries"
                            error=message(Field::MaxRetries)
                            on_edit=edited(Field::MaxRetries)
                        />
                        <NumberField
                            id=interval_id.clone()
                            label="Initial interval"
                            hint="Delay before the first retry, 1 second to 1 hour; each later delay doubles (capped at 24 hours)."
                            text=draft.interval
                            unit=draft.interval_unit
                            units=&Unit::FOR_INTERVAL
                            error=message(Field::InitialIntervalSeconds)
                            on_edit=edited(Field::InitialIntervalSeconds)
                        />
                    </div>
                </Show>

                <Switch
                    id=wait_id
                    label="Wait for a trusted reset time"
                    checked=draft.wait_enabled
                    on_change=Callback::new(move |on| {
                        draft.set_wait_enabled(on);
                        messages.clear.run(path.run("wait_for_reset.enabled"));
                    })
                />
                <p class="text-xs text-slate-600">
                    "Reset waiting applies only to trusted future reset times within the maximum: a reset or \
                     retry-after time the provider reported in a structured, validated form, later than now and \
                     no later than the maximum wait. It is used at most once per candidate and class in a route \
                     cycle and is followed by one attempt. A reset further away is not shortened: Recourse goes \
                     on to retry or to the outcome below."
                </p>
                <Show when=move || draft.wait_enabled.get()>
                    <div class="border-l-2 border-indigo-200 pl-3">
                        <NumberField
                            id=max_wait_id.clone()
                            label="Maximum wait"
                            hint="Longest reset time to wait for, 1 second to 7 days."
                            text=draft.max_wait
                            unit=draft.wait_unit
                            units=&Unit::FOR_WAIT
                            error=message(Field::MaxWaitSeconds)
                            on_edit=edited(Field::MaxWaitSeconds)
                        />
                    </div>
                </Show>

                <div>
                    <label for=outcome_id.clone() class="block text-sm font-medium text-slate-900">
                        "When recovery is used up"
                    </label>
                    <select
                        id=outcome_id.clone()
                        class=format!(
                            "mt-1 h-11 w-full rounded-md border border-slate-400 bg-white px-2 text-base text-slate-900 sm:w-auto {FOCUS}",
                        )
                        aria-describedby=format!("{outcome_id}-error")
                        on:change=move |ev| {
                            if let Some(o) = OnExhausted::parse(&event_target_value(&ev)) {
                                draft.on_exhausted.set(o);
                                messages.clear.run(path.run("on_exhausted"));
                            }
                        }
                    >
                        <option value="skip" selected=move || draft.on_exhausted.get() == OnExhausted::Skip>
                            "Skip candidate (try the next one)"
                        </option>
                        <option value="stop" selected=move || draft.on_exhausted.get() == OnExhausted::Stop>
                            "Stop (wait for a person)"
                        </option>
                    </select>
                    <p
                        id=format!("{outcome_id}-error")
                        class="mt-1 text-sm font-medium text-red-700"
                        hidden=move || outcome_message.with(Option::is_none)
                    >
                        {move || outcome_message.get().unwrap_or_default()}
                    </p>
                </div>

                <div class="rounded-md border border-indigo-200 bg-white p-3">
                    <p class="text-sm font-medium text-slate-900">"Schedule"</p>
                    <p id=preview_id class="mt-1 text-sm text-slate-800" aria-live="polite" data-testid="schedule-preview">
                        {preview}
                    </p>
                </div>
            </div>
        </section>
    }
    .into_any()
}

/// The path of a numeric field inside a class policy.
fn field_rel(field: Field) -> &'static str {
    match field {
        Field::MaxRetries => "retry.max_retries",
        Field::InitialIntervalSeconds => "retry.initial_interval_seconds",
        Field::MaxWaitSeconds => "wait_for_reset.max_wait_seconds",
    }
}
