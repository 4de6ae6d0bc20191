//! Form controls shared by the editors: a labelled on/off switch, a number field with an
//! optional unit picker, and the inline error under a field. Every control is at least 44 px
//! tall (`min-h-11`), has a visible label and a visible focus ring, and points at its error
//! with `aria-describedby` and `aria-invalid`, so a screen reader hears what a sighted person
//! sees.

use crate::draft::Unit;
use leptos::prelude::*;

/// The focus ring every control uses.
pub const FOCUS: &str = "focus-visible:outline focus-visible:outline-2 focus-visible:outline-offset-2 \
                         focus-visible:outline-indigo-600";

/// An on/off switch: a button with `role="switch"`, its label as its name.
#[component]
pub fn Switch(
    /// Element id.
    #[prop(into)]
    id: String,
    /// Visible label; also the accessible name.
    #[prop(into)]
    label: String,
    #[prop(into)] checked: Signal<bool>,
    /// Called with the new value.
    on_change: Callback<bool>,
) -> impl IntoView {
    view! {
        <button
            type="button"
            role="switch"
            id=id
            aria-checked=move || checked.get().to_string()
            class=format!(
                "flex min-h-11 w-full items-center justify-between gap-3 rounded-md border border-slate-300 bg-white \
                 px-3 py-2 text-left text-sm font-medium text-slate-900 hover:bg-slate-50 {FOCUS}",
            )
            on:click=move |_| on_change.run(!checked.get_untracked())
        >
            <span>{label}</span>
            <span
                aria-hidden="true"
                class=move || {
                    if checked.get() {
                        "relative inline-flex h-6 w-11 shrink-0 items-center rounded-full bg-indigo-600"
                    } else {
                        "relative inline-flex h-6 w-11 shrink-0 items-center rounded-full bg-slate-400"
                    }
                }
            >
                <span class=move || {
                    if checked.get() {
                        "inline-block h-5 w-5 translate-x-5 rounded-full bg-white shadow"
                    } else {
                        "inline-block h-5 w-5 translate-x-0.5 rounded-full bg-white shadow"
                    }
                }></span>
            </span>
            <span class="sr-only">{move || if checked.get() { "on" } else { "off" }}</span>
        </button>
    }
    .into_any()
}

/// The message under a field, present only while there is one. `id` is what the field's
/// `aria-describedby` names.
#[component]
pub fn FieldMessage(
    #[prop(into)] id: String,
    #[prop(into)] message: Signal<Option<String>>,
) -> impl IntoView {
    view! {
        <p id=id class="mt-1 text-sm font-medium text-red-700" hidden=move || message.with(Option::is_none)>
            {move || message.get().unwrap_or_default()}
        </p>
    }
}

/// Every message the server gave about a form, as `path: message` lines under its submit
/// button, so one whose field is not on screen (or is not a field at all) is never lost.
#[component]
pub fn ServerMessageList(
    #[prop(into)] errors: Signal<Vec<policy::document::ValidationError>>,
) -> impl IntoView {
    view! {
        <ul class="list-disc pl-5 font-normal">
            {move || {
                errors
                    .get()
                    .into_iter()
                    .map(|e| view! { <li class="break-words">{format!("{}: {}", e.path, e.message)}</li> })
                    .collect_view()
            }}
        </ul>
    }
}

/// A number typed as text (so the policy validator sees exactly what was typed), with a unit
/// picker when `units` is not empty and a fixed unit word otherwise.
#[component]
pub fn NumberField(
    #[prop(into)] id: String,
    #[prop(into)] label: String,
    /// A short hint under the label (limits, what the number means).
    #[prop(into)]
    hint: String,
    text: RwSignal<String>,
    /// The unit picked, when the field has a unit picker.
    #[prop(optional)]
    unit: Option<RwSignal<Unit>>,
    /// The units offered; empty for a plain count.
    #[prop(optional)]
    units: &'static [Unit],
    /// The word after a plain count ("retries").
    #[prop(optional)]
    suffix: &'static str,
    #[prop(into)] error: Signal<Option<String>>,
    /// Called after every edit (clears the server's message for this field).
    on_edit: Callback<()>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    let hint_id = format!("{id}-hint");
    let unit_id = format!("{id}-unit");
    let described = format!("{hint_id} {error_id}");
    let invalid = move || error.with(Option::is_some).to_string();
    let input_class = move || {
        let border = if error.with(Option::is_some) {
            "border-red-700"
        } else {
            "border-slate-400"
        };
        format!(
            "h-11 w-28 rounded-md border {border} bg-white px-3 text-base text-slate-900 tabular-nums {FOCUS}"
        )
    };
    let picker = unit.filter(|_| !units.is_empty()).map(|unit| {
        let label = format!("{label}: unit");
        view! {
            <label for=unit_id.clone() class="sr-only">{label}</label>
            <select
                id=unit_id.clone()
                class=format!(
                    "h-11 rounded-md border border-slate-400 bg-white px-2 text-base text-slate-900 {FOCUS}",
                )
                on:change=move |ev| {
                    if let Some(u) = Unit::parse(&event_target_value(&ev)) {
                        unit.set(u);
                        on_edit.run(());
                    }
                }
            >
                {units
                    .iter()
                    .map(|u| {
                        let u = *u;
                        view! {
                            <option value=u.key() selected=move || unit.get() == u>
                                {u.key()}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
        }
    });
    view! {
        <div>
            <label for=id.clone() class="block text-sm font-medium text-slate-900">
                {label}
            </label>
            <p id=hint_id class="text-xs text-slate-600">
                {hint}
            </p>
            <div class="mt-1 flex flex-wrap items-center gap-2">
                <input
                    id=id
                    type="text"
                    inputmode="decimal"
                    autocomplete="off"
                    class=input_class
                    aria-describedby=described
                    aria-invalid=invalid
                    value=move || text.get()
                    prop:value=move || text.get()
                    on:input=move |ev| {
                        text.set(event_target_value(&ev));
                        on_edit.run(());
                    }
                />
                {picker}
                {(!suffix.is_empty()).then(|| view! { <span class="text-sm text-slate-700">{suffix}</span> })}
            </div>
            <FieldMessage id=error_id message=error />
        </div>
    }
    .into_any()
}
