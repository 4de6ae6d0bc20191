//! A Copy button for a text shown once (a new API token's secret). It puts the text on the
//! clipboard and says so; where the browser offers no clipboard (a page served over plain HTTP
//! from another machine), it selects the text in its field so the person copies it by hand,
//! and says that instead. Nothing is copied before the person asks.

use crate::components::controls::FOCUS;
use leptos::prelude::*;

/// What the last press of the button did (only ever set in the browser).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum Copied {
    Yes,
    /// The clipboard was not offered or refused; the text is selected in its field.
    ByHand,
}

/// A button that copies `text`; `target` is the id of the read-only field that shows it.
#[component]
pub fn CopyButton(#[prop(into)] target: String, #[prop(into)] text: String) -> impl IntoView {
    let copied: RwSignal<Option<Copied>> = RwSignal::new(None);
    let (target, text) = (StoredValue::new(target), StoredValue::new(text));
    view! {
        <button
            type="button"
            class=format!(
                "min-h-11 rounded-md bg-indigo-700 px-4 text-sm font-semibold text-white {FOCUS}",
            )
            on:click=move |_| {
                copied.set(None);
                copy(&text.get_value(), &target.get_value(), copied);
            }
        >
            "Copy"
        </button>
        <span role="status" class="self-center text-sm text-slate-800">
            {move || match copied.get() {
                Some(Copied::Yes) => "Copied to the clipboard.",
                Some(Copied::ByHand) => "This browser offers no clipboard here: the token is selected, copy it by hand.",
                None => "",
            }}
        </span>
    }
}

#[cfg(feature = "hydrate")]
fn copy(text: &str, target: &str, copied: RwSignal<Option<Copied>>) {
    use wasm_bindgen::{JsCast, JsValue};
    let Some(window) = web_sys::window() else {
        return;
    };
    // Selected first, so whatever happens next the person can copy it by hand.
    if let Some(field) = window
        .document()
        .and_then(|d| d.get_element_by_id(target))
        .and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok())
    {
        field.select();
    }
    let clipboard = window.navigator().clipboard();
    // `navigator.clipboard` is undefined outside a secure context.
    if JsValue::from(clipboard.clone()).is_undefined() {
        copied.set(Some(Copied::ByHand));
        return;
    }
    let written = wasm_bindgen_futures::JsFuture::from(clipboard.write_text(text));
    leptos::task::spawn_local(async move {
        let outcome = if written.await.is_ok() {
            Copied::Yes
        } else {
            Copied::ByHand
        };
        copied.try_set(Some(outcome));
    });
}

/// Rendered on the server, the button does nothing until the page is live.
#[cfg(not(feature = "hydrate"))]
fn copy(_text: &str, _target: &str, _copied: RwSignal<Option<Copied>>) {}
