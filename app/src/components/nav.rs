//! The top navigation. On a phone the links fold behind a menu button so the page keeps one
//! column and no horizontal overflow; on a desktop they are always visible. It says who is
//! signed in, offers "Sign out" (a plain form: it works before the script loads), and, on a
//! demo server, says plainly that everyone who reaches it is signed in.
//!
//! The header's links are one table, [`LINKS`]: a new page's link is one row, shown to whoever
//! its predicate admits (the server's rules decide access to the page itself). Anything else the
//! header shows for the signed-in person (a count, a badge) goes between the links and their
//! name, where the session is already read: people who may view routes get the notifications item
//! with their unread count (`notify_bell`).

use crate::{
    auth::SessionResource,
    components::notify_bell::{header_notifications, NotificationBell},
};
use leptos::prelude::*;
use leptos_router::components::A;
use policy::auth::{Permission, Permissions};

/// One link of the header.
pub struct NavLink {
    pub href: &'static str,
    pub label: &'static str,
    /// Who sees it, by their permissions.
    pub shown: fn(Permissions) -> bool,
}

/// The header's links, in order.
pub const LINKS: [NavLink; 4] = [
    NavLink {
        href: "/",
        label: "Routes",
        shown: |p| p.contains(Permission::ViewRoutes),
    },
    NavLink {
        href: "/profiles",
        label: "Profiles",
        shown: |p| p.contains(Permission::ViewRoutes) || p.contains(Permission::ManageProfiles),
    },
    NavLink {
        href: "/access",
        label: "Access",
        shown: |_| true,
    },
    NavLink {
        href: "/audit",
        label: "Audit",
        shown: |p| p.contains(Permission::Admin),
    },
];

#[component]
pub fn NavBar() -> impl IntoView {
    let (open, set_open) = signal(false);
    let session = expect_context::<SessionResource>();
    let notifications = header_notifications(session);
    // `min-h-11`: every link stays 44 px tall on a desktop too, where the text gets smaller.
    let link_class = "flex min-h-11 items-center rounded-md px-3 py-3 text-base font-medium text-slate-700 hover:bg-slate-100 \
                      focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600 \
                      aria-[current=page]:bg-indigo-50 aria-[current=page]:text-indigo-800 sm:py-2 sm:text-sm";
    view! {
        <header class="border-b border-slate-200 bg-white">
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let demo = matches!(session.await, Ok(v) if v.viewer.as_ref().is_some_and(|w| w.demo));
                    demo.then(|| {
                        view! {
                            <p role="note" data-testid="demo-banner" class="bg-amber-100 px-4 py-2 text-center text-sm font-medium text-amber-950">
                                "Demo account: anyone who can reach this server is signed in."
                            </p>
                        }
                    })
                })}
            </Suspense>
            <nav aria-label="Main" class="mx-auto flex max-w-5xl flex-wrap items-center justify-between gap-2 px-4 py-2 sm:px-6">
                <a href="/" class="flex min-h-11 items-center gap-2 rounded-md text-lg font-semibold text-slate-900 focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600">
                    <span aria-hidden="true" class="inline-block h-3 w-3 rounded-full bg-indigo-600"></span>
                    "Recourse"
                </a>
                <button
                    type="button"
                    class="min-h-11 min-w-11 rounded-md border border-slate-300 px-3 text-sm font-medium text-slate-800 \
                           focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600 sm:hidden"
                    aria-controls="main-menu"
                    aria-expanded=move || open.get().to_string()
                    on:click=move |_| set_open.update(|o| *o = !*o)
                >
                    {move || if open.get() { "Close menu" } else { "Menu" }}
                </button>
                <ul
                    id="main-menu"
                    class=move || {
                        if open.get() {
                            "w-full sm:flex sm:w-auto sm:gap-1"
                        } else {
                            "hidden w-full sm:flex sm:w-auto sm:gap-1"
                        }
                    }
                >
                    <Suspense fallback=|| ()>
                        {move || Suspend::new(async move {
                            let viewer = session.await.ok().and_then(|v| v.viewer);
                            viewer.map(|who| {
                                view! {
                                    {LINKS
                                        .into_iter()
                                        .filter(|link| (link.shown)(who.permissions))
                                        .map(|link| {
                                            view! {
                                                <li>
                                                    <A href=link.href attr:class=link_class on:click=move |_| set_open.set(false)>
                                                        {link.label}
                                                    </A>
                                                </li>
                                            }
                                        })
                                        .collect_view()}
                                    {who
                                        .permissions
                                        .contains(Permission::ViewRoutes)
                                        .then(|| {
                                            view! {
                                                <li>
                                                    <NotificationBell page=notifications class=link_class on_follow=Callback::new(move |()| set_open.set(false)) />
                                                </li>
                                            }
                                        })}
                                    <li class="flex items-center gap-2 sm:ml-2">
                                        <span class="px-3 text-sm text-slate-700" data-testid="signed-in-as">{who.name}</span>
                                        <form method="post" action="/logout">
                                            <button
                                                type="submit"
                                                class="min-h-11 rounded-md border border-slate-300 px-3 text-sm font-medium text-slate-800 \
                                                       focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600"
                                            >
                                                "Sign out"
                                            </button>
                                        </form>
                                    </li>
                                }
                            })
                        })}
                    </Suspense>
                </ul>
            </nav>
        </header>
    }
}
