//! The WASM entry point: hydrates the server-rendered page so it becomes interactive.
//!
//! The pages' code is not in this WASM: each page is a lazy route whose code is a piece of its
//! own, fetched when the page is first shown (`app::pages`). So hydration is asynchronous: it
//! waits for the piece of the page being hydrated, which the server already asked the browser
//! to preload beside this WASM.
//!
//! The crate is empty on any other target: its dependencies are declared for wasm32 only (see
//! `Cargo.toml`), so a native build of the workspace never compiles the browser half of the UI.

// Leptos views are deeply nested static types; computing the layout of the page's hydration
// future exceeds the default limit of 128 in release builds.
#![recursion_limit = "256"]
#![cfg(target_arch = "wasm32")]

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_lazy(app::App);
}
