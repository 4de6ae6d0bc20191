//! A summary line that shows and hides a panel of explanation that must be visible text, not a
//! tooltip.
//!
//! Built on the browser's own `<details>`/`<summary>`: the browser opens and closes it and tells
//! assistive technology whether it is expanded, so it works on the page as served, before the
//! WASM has arrived (on a slow phone network that is seconds earlier), and without it. It keeps
//! no state of its own, so hydration leaves it open or closed as the person left it.

use leptos::prelude::*;

/// The summary line's look; the browser's triangle marker is replaced by `+` / `−`.
const SUMMARY: &str = "flex min-h-11 cursor-pointer list-none items-center justify-between gap-3 \
                       rounded-lg px-4 py-2 font-medium text-slate-900 [&::-webkit-details-marker]:hidden \
                       focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600";

#[component]
pub fn Disclosure(
    /// The id of the panel.
    id: &'static str,
    /// The summary line's text.
    label: &'static str,
    children: Children,
) -> impl IntoView {
    view! {
        <details class="group rounded-lg border border-slate-200 bg-white">
            <summary class=SUMMARY>
                <span>{label}</span>
                <span aria-hidden="true" class="text-slate-500 group-open:hidden">"+"</span>
                <span aria-hidden="true" class="hidden text-slate-500 group-open:inline">"−"</span>
            </summary>
            <div id=id class="border-t border-slate-200 px-4 py-3 text-sm text-slate-700">
                {children()}
            </div>
        </details>
    }
}
