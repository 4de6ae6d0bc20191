//! A button that shows and hides a panel, with `aria-expanded` kept in step. Used for the
//! policy areas of candidates and for explanations that must be visible text, not tooltips.

use leptos::prelude::*;

#[component]
pub fn Disclosure(
    /// The id of the panel, referenced by `aria-controls`.
    id: &'static str,
    /// The button's label.
    label: &'static str,
    children: ChildrenFn,
) -> impl IntoView {
    let (open, set_open) = signal(false);
    view! {
        <div class="rounded-lg border border-slate-200 bg-white">
            <button
                type="button"
                class="flex min-h-11 w-full items-center justify-between gap-3 rounded-lg px-4 py-2 text-left font-medium \
                       text-slate-900 focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600"
                aria-controls=id
                aria-expanded=move || open.get().to_string()
                on:click=move |_| set_open.update(|o| *o = !*o)
            >
                <span>{label}</span>
                <span aria-hidden="true" class="text-slate-500">
                    {move || if open.get() { "−" } else { "+" }}
                </span>
            </button>
            <div id=id class="border-t border-slate-200 px-4 py-3 text-sm text-slate-700" hidden=move || !open.get()>
                {children()}
            </div>
        </div>
    }
}
