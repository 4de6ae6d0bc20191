//! The page for any path the router does not know.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    crate::pages::page_shown();
    #[cfg(feature = "ssr")]
    {
        if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
            resp.set_status(http::StatusCode::NOT_FOUND);
        }
    }
    view! {
        <Title text="Not found" />
        <h1 class="text-2xl font-semibold">"Page not found"</h1>
        <p class="mt-2 text-slate-600">
            "There is nothing at this address. " <a
                class="inline-flex min-h-11 items-center text-indigo-700 underline focus-visible:outline \
                       focus-visible:outline-2 focus-visible:outline-indigo-600"
                href="/"
            >
                "Go to routes"
            </a>
        </p>
    }
}
