//! Choosing how a candidate is reached: the dispatcher select and, for `acp` and `http`, the
//! select of the configured agent or endpoint that runs it. Shared by the profile editor and
//! the new-profile form.
//!
//! The dispatcher select offers what the server can run ([`Configured::offered`]); where the
//! configuration lists no agents or endpoints the form says so right there, and where to add
//! them. A kind or runner stored earlier that the configuration no longer has stays selected,
//! marked "(not configured on this server)", with a message on its select that says what to
//! do; nothing changes it but the person.

use crate::{
    components::controls::{FieldMessage, FOCUS},
    configured::{needs_runner, not_configured, runner_noun, runner_text, Configured},
    draft::{dispatcher_label, TargetDraft},
};
use leptos::prelude::*;
use policy::api::DispatcherKind;

/// Text with `code` spans between backticks ("given to `recourse serve --config`").
pub fn with_code(text: &str) -> impl IntoView {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                view! { <code class="break-all rounded bg-slate-100 px-1 text-slate-800">{part.to_owned()}</code> }
                    .into_any()
            } else {
                part.to_owned().into_any()
            }
        })
        .collect_view()
}

/// The dispatcher select and the runner select for `target`. Element ids start with `prefix`
/// (`{prefix}-dispatcher`, `{prefix}-runner`); `labels` are the two selects' labels (the
/// runner's gets "agent" or "endpoint" after it). `server_runner` is the server's message for
/// the target's runner (a 422 at `targets[i].runner`); `on_edit` runs after every change.
#[component]
pub fn DispatcherChoice(
    target: TargetDraft,
    configured: StoredValue<Configured>,
    #[prop(into)] prefix: String,
    /// The dispatcher select's label, and the word before the runner's kind ("Its" → "Its agent").
    labels: (&'static str, &'static str),
    server_runner: Signal<Option<String>>,
    on_edit: Callback<()>,
    /// A sentence added to the dispatcher's hint.
    #[prop(optional)]
    hint_suffix: &'static str,
    /// Shown under the dispatcher select (a message about the whole target).
    #[prop(optional)]
    children: Option<Children>,
) -> impl IntoView {
    // What was stored (or chosen before this form opened): offered even if not configured.
    let stored_kind = target.dispatcher.get_untracked();
    let stored_runner = StoredValue::new(target.runner.get_untracked().trim().to_owned());
    let offered = configured.with_value(|c| c.offered(stored_kind));
    let problem = Memo::new(move |_| configured.with_value(|c| target.problem(c)));
    let kind_error = Signal::derive(move || problem.get().filter(|p| !p.is_runner()).map(|p| p.message()));
    let runner_error = Signal::derive(move || match problem.get().filter(|p| p.is_runner()) {
        Some(p) => Some(p.message()),
        None => server_runner.get(),
    });
    let note = configured.with_value(Configured::missing_note);

    let dispatcher_id = format!("{prefix}-dispatcher");
    let hint_id = format!("{prefix}-dispatcher-hint");
    let note_id = format!("{prefix}-dispatcher-note");
    let kind_error_id = format!("{prefix}-dispatcher-error");
    let runner_id = format!("{prefix}-runner");
    let runner_hint_id = format!("{prefix}-runner-hint");
    let runner_error_id = format!("{prefix}-runner-error");
    let described = if note.is_some() {
        format!("{hint_id} {note_id} {kind_error_id}")
    } else {
        format!("{hint_id} {kind_error_id}")
    };
    let select_class = move |error: Signal<Option<String>>| {
        move || {
            let border = if error.with(Option::is_some) {
                "border-red-700"
            } else {
                "border-slate-400"
            };
            format!(
                "mt-1 h-11 w-full max-w-full rounded-md border {border} bg-white px-2 text-base text-slate-900 {FOCUS}"
            )
        }
    };

    // The runner select's options for the kind chosen: the configured ones, and the stored
    // runner when the configuration no longer has it (or a prompt when none was stored).
    let runner_options = move || {
        let kind = target.dispatcher.get();
        let mut options: Vec<(String, String)> = Vec::new();
        if kind == stored_kind && needs_runner(kind) {
            let stored = stored_runner.get_value();
            if stored.is_empty() {
                options.push((String::new(), format!("Choose an {}", runner_noun(kind))));
            } else if configured.with_value(|c| c.find(kind, &stored).is_none()) {
                let text = not_configured(&stored);
                options.push((stored, text));
            }
        }
        configured.with_value(|c| {
            options.extend(c.of(kind).map(|r| (r.id.clone(), runner_text(r))));
        });
        options
            .into_iter()
            .map(|(value, text)| {
                let v = value.clone();
                view! {
                    <option value=value selected=move || target.runner.with(|r| r.trim() == v)>
                        {text}
                    </option>
                }
            })
            .collect_view()
    };
    let runner_label = move || {
        let noun = runner_noun(target.dispatcher.get());
        match labels.1 {
            "" => {
                let mut chars = noun.chars();
                chars
                    .next()
                    .map(|c| c.to_uppercase().chain(chars).collect())
                    .unwrap_or_default()
            }
            word => format!("{word} {noun}"),
        }
    };

    view! {
        <div class="min-w-0 space-y-3 sm:col-span-2" data-testid="dispatcher-choice">
            <div class="min-w-0">
                <label for=dispatcher_id.clone() class="block text-sm font-medium text-slate-900">
                    {labels.0}
                </label>
                <select
                    id=dispatcher_id
                    aria-describedby=described
                    aria-invalid=move || kind_error.with(Option::is_some).to_string()
                    class=select_class(kind_error)
                    on:change=move |ev| {
                        if let Some(kind) = DispatcherKind::parse(&event_target_value(&ev)) {
                            configured.with_value(|c| target.pick(kind, c));
                            on_edit.run(());
                        }
                    }
                >
                    {offered
                        .into_iter()
                        .map(|kind| {
                            let text = if configured.with_value(|c| c.runs(kind)) {
                                kind.as_str().to_owned()
                            } else {
                                not_configured(kind.as_str())
                            };
                            view! {
                                <option value=kind.as_str() selected=move || target.dispatcher.get() == kind>
                                    {text}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
                <p id=hint_id class="mt-1 text-xs text-slate-600">
                    {move || {
                        let label = dispatcher_label(target.dispatcher.get());
                        if hint_suffix.is_empty() { label.to_owned() } else { format!("{label}. {hint_suffix}") }
                    }}
                </p>
                {note
                    .map(|note| {
                        view! {
                            <p id=note_id class="mt-1 text-sm text-slate-800" data-testid="runners-note">
                                {with_code(&note)}
                            </p>
                        }
                    })}
                <p
                    id=kind_error_id
                    class="mt-1 text-sm font-medium text-red-700"
                    hidden=move || kind_error.with(Option::is_none)
                >
                    {move || kind_error.get().map(|m| with_code(&m))}
                </p>
                {children.map(|c| c())}
            </div>
            <Show when=move || needs_runner(target.dispatcher.get())>
                <div class="min-w-0">
                    <label for=runner_id.clone() class="block text-sm font-medium text-slate-900">
                        {runner_label}
                    </label>
                    <select
                        id=runner_id.clone()
                        aria-describedby=format!("{runner_hint_id} {runner_error_id}")
                        aria-invalid=move || runner_error.with(Option::is_some).to_string()
                        class=select_class(runner_error)
                        on:change=move |ev| {
                            target.runner.set(event_target_value(&ev));
                            on_edit.run(());
                        }
                    >
                        {runner_options}
                    </select>
                    <p id=runner_hint_id.clone() class="mt-1 break-words text-xs text-slate-600">
                        {move || {
                            let kind = target.dispatcher.get();
                            let hint = target.runner.with(|r| configured.with_value(|c| c.runner_hint(kind, r)));
                            with_code(&hint)
                        }}
                    </p>
                    <FieldMessage id=runner_error_id.clone() message=runner_error />
                </div>
            </Show>
        </div>
    }
    .into_any()
}
