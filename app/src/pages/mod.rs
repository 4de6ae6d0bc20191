//! One module per route, each with the lazy route that shows it.
//!
//! Pages load on demand: every page is a [`LazyRoute`](leptos_router::LazyRoute) whose view is
//! split out of the main WASM (`cargo leptos build --split`) into a piece of its own, fetched the
//! first time the page is shown. The main WASM carries the shell (navigation, the session, the
//! router) and what the pages share; the server preloads the piece of the page it renders, so
//! a first visit downloads the shell and that page, and the other pages come when opened.
//!
//! To add a page: a module here with its `#[component]`, a [`lazy_page!`] line naming its route
//! type, and one `<Route>` in [`crate::App`] (the one router); a link in the header is one row
//! of `components::nav::LINKS`.

pub mod access;
pub mod audit;
pub mod home;
pub mod login;
pub mod not_found;
pub mod notifications;
pub mod profile;
pub mod profile_edit;
pub mod profile_new;
pub mod profiles;
pub mod route;

use leptos::prelude::{provide_context, use_context, Effect, RwSignal, Set};

/// Declares `$route`, the lazy route that shows the page component `$page`: the code reachable
/// only from `$page` is split into its own WASM piece.
macro_rules! lazy_page {
    ($route:ident, $page:ident) => {
        #[doc = concat!("The lazy route of [`", stringify!($page), "`].")]
        pub struct $route;

        #[leptos_router::lazy_route]
        impl leptos_router::LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> leptos::prelude::AnyView {
                let page = $page();
                $crate::pages::page_shown();
                leptos::prelude::IntoAny::into_any(page)
            }
        }
    };
}
pub(crate) use lazy_page;

/// Whether the page being shown is live: its own code has arrived and hydrated what the server
/// rendered. The shell (navigation, the router) hydrates first, as soon as the main WASM runs;
/// a page's code is a piece of its own, fetched beside it, and until that piece has hydrated
/// the page, its buttons are the server's HTML with no handler behind them. `App` shows this as
/// `data-hydrated` on `#app`, which tests wait for before they tap, and which flipped with the
/// shell alone before: a tap in between, while the page's piece was still on its way, was lost.
#[derive(Clone, Copy)]
pub struct PageLive(RwSignal<bool>);

/// Provides [`PageLive`], false until the first page shown says it is live; returns its signal.
pub fn provide_page_live() -> RwSignal<bool> {
    let live = RwSignal::new(false);
    provide_context(PageLive(live));
    live
}

/// Called by each page's view (every [`lazy_page!`], and the page for unknown paths): the page
/// is live once that view has hydrated, which is when an effect created here first runs (effects
/// run only in the browser, after the render that created them). Pages shown later, by the
/// router in the browser, are live as they render; the flag stays set.
pub fn page_shown() {
    if let Some(PageLive(live)) = use_context::<PageLive>() {
        Effect::new(move |_| live.set(true));
    }
}
