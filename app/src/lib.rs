//! `app`: Recourse's user interface, server-rendered and hydrated with Leptos.
//!
//! The same components render on the server (feature `ssr`) and hydrate in the browser
//! (feature `hydrate`). This crate never touches SQL or timers; data will come through server
//! functions that call a backend port implemented by `server`, so the browser and the REST API
//! share one set of services.
//!
//! Map: [`shell`] is the HTML document; [`App`] holds the router (the one place a page is
//! added); `pages/` has one file per route, each a lazy route whose code loads when the page is
//! first shown, and `components/` the pieces they share (`components::nav` the header, whose
//! links are one table).

// The server and the browser are two builds of this crate, never one. With both features on,
// client-side effects would run inside the server and panic outside a `LocalSet` (issue 15).
// `frontend` declares `hydrate` for wasm32 only, so no native build can reach this.
#[cfg(all(feature = "ssr", feature = "hydrate"))]
compile_error!(
    "`app` was built with both `ssr` and `hydrate`: build the server and the WASM front end \
     separately (`cargo leptos build`, or `cargo build --bin recourse` for the server alone)"
);

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, Lazy, SsrMode,
};

pub mod api;
pub mod auth;
#[cfg(feature = "ssr")]
pub mod backend;
pub mod codec;
pub mod components;
pub mod configured;
pub mod draft;
pub mod error;
pub mod pages;

use components::nav::NavBar;
use pages::{
    access::AccessRoute, audit::AuditRoute, home::HomeRoute, login::LoginRoute, not_found::NotFound,
    notifications::NotificationsRoute, profile::ProfileRoute, profile_edit::ProfileEditRoute,
    profiles::ProfilesRoute, route::RoutePageRoute,
};

/// The HTML document around the app, rendered by the server for every page.
///
/// The script, WASM and stylesheet share one content-hashed name, `options.output_name`
/// (the server sets it from the assets it embeds), so browsers can keep them for a year.
/// `HydrationScripts` carries the per-response CSP nonce that `leptos_axum` provides.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let stylesheet = format!("/{}/{}.css", options.site_pkg_dir, options.output_name);
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content="light" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <link id="leptos" rel="stylesheet" href=stylesheet />
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

/// The document's title for a page's title; the shell's own (empty) is just the product's name.
fn shell_title(page: String) -> String {
    if page.is_empty() {
        "Recourse".to_owned()
    } else {
        format!("{page} · Recourse")
    }
}

/// The application: navigation plus one page per route.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    auth::provide_session();
    components::live::provide_event_ticks();
    // True once the page shown has hydrated: the shell and the page's own piece
    // (`pages::PageLive`). Tests and people can tell a live page from a static one by
    // `data-hydrated`.
    let live = pages::provide_page_live();

    view! {
        // The shell's title: every page's `<Title>` is shown as "Page · Recourse". It has a text
        // of its own, empty, shown as "Recourse": leptos_meta sets the document's title from the
        // titles registered so far, and a page's registers only once its lazy code has loaded,
        // after the shell hydrated. Without one the document had no title in between.
        <Title text="" formatter=shell_title />
        <Router>
            <div id="app" data-hydrated=move || live.get().to_string() class="flex min-h-screen flex-col">
                <NavBar />
                <main id="main" class="mx-auto w-full max-w-5xl flex-1 px-4 py-6 sm:px-6">
                    // Pages are rendered in order (each Suspense waits for its data) rather
                    // than out of order with fallbacks swapped in later: the server sends a page
                    // in one piece anyway (it hashes it for its ETag and compresses it), and an
                    // in-order page is the same bytes for the same data, so a reload revalidates
                    // with a 304. (`SsrMode::Async` would do too, but it sometimes never finished
                    // a page when several rendered at once in the server's tests.)
                    //
                    // The one router: every page is a lazy route (`pages`), its code fetched
                    // when it is first shown. A new page is one line here.
                    <Routes fallback=NotFound>
                        <Route path=path!("") view={Lazy::<HomeRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/profiles") view={Lazy::<ProfilesRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/profiles/new") view={Lazy::<ProfileEditRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/profiles/:id") view={Lazy::<ProfileRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/profiles/:id/edit") view={Lazy::<ProfileEditRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/routes/:id") view={Lazy::<RoutePageRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/login") view={Lazy::<LoginRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/audit") view={Lazy::<AuditRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/access") view={Lazy::<AccessRoute>::new()} ssr=SsrMode::InOrder />
                        <Route path=path!("/notifications") view={Lazy::<NotificationsRoute>::new()} ssr=SsrMode::InOrder />
                    </Routes>
                </main>
            </div>
        </Router>
    }
}
