//! `app`: Recourse's user interface, server-rendered and hydrated with Leptos.
//!
//! The same components render on the server (feature `ssr`) and hydrate in the browser
//! (feature `hydrate`). This crate never touches SQL or timers; data will come through server
//! functions that call a backend port implemented by `server`, so the browser and the REST API
//! share one set of services.
//!
//! Map: [`shell`] is the HTML document; [`App`] holds the router; `pages/` has one file per
//! route and `components/` the pieces they share.

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path,
};

pub mod api;
#[cfg(feature = "ssr")]
pub mod backend;
pub mod components;
pub mod draft;
pub mod error;
pub mod pages;

use components::nav::NavBar;
use pages::{
    home::HomePage, not_found::NotFound, profile::ProfilePage, profiles::ProfilesPage, route::RoutePage,
};

/// The HTML document around the app, rendered by the server for every page.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content="light" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <AutoReload options=options.clone() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body class="min-h-screen bg-slate-50 text-slate-900 antialiased">
                <App />
            </body>
        </html>
    }
}

/// The application: navigation plus one page per route.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Effects run only in the browser, so this flips once the WASM has hydrated the page.
    // Tests and people can tell a live page from a static one by `data-hydrated`.
    let (hydrated, set_hydrated) = signal(false);
    Effect::new(move |_| set_hydrated.set(true));

    view! {
        <Stylesheet id="leptos" href="/pkg/recourse.css" />
        <Title formatter=|page: String| format!("{page} · Recourse") />
        <Router>
            <div id="app" data-hydrated=move || hydrated.get().to_string() class="flex min-h-screen flex-col">
                <NavBar />
                <main id="main" class="mx-auto w-full max-w-5xl flex-1 px-4 py-6 sm:px-6">
                    <Routes fallback=NotFound>
                        <Route path=path!("") view=HomePage />
                        <Route path=path!("/profiles") view=ProfilesPage />
                        <Route path=path!("/profiles/:id") view=ProfilePage />
                        <Route path=path!("/routes/:id") view=RoutePage />
                    </Routes>
                </main>
            </div>
        </Router>
    }
}
