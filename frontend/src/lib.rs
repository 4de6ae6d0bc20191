//! The WASM entry point: hydrates the server-rendered page so it becomes interactive.

// Leptos views are deeply nested static types; computing the layout of the page's hydration
// future exceeds the default limit of 128 in release builds.
#![recursion_limit = "256"]

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
