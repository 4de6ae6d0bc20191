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
                leptos::prelude::IntoAny::into_any($page())
            }
        }
    };
}
pub(crate) use lazy_page;
