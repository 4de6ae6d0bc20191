//! The header's notification item: a link to `/notifications` with the signed-in person's
//! unread count, kept current without a reload, and (when this tab is open and the person
//! allowed it) the browser's own notification for each new one.
//!
//! Why it rereads the count on every route event: every notification is written in the same
//! transaction as the route change that caused it (circuit events included: a route's change
//! moves the circuit), so when the change's event reaches the page the notification can be
//! read. The event only says "something changed"; the count and the newest notifications are
//! read again through the server function, so what is shown is the server's. The header opens
//! no stream of its own: it reads the app-wide tick of the page's stream
//! (`live::EventTicks`), so on a live page (routes, a route, notifications) it is live, and on
//! another page it is as current as the page's load.
//!
//! Browser notifications: only after the person allowed them (the permission is asked for by a
//! button on the notifications page, never unprompted), only for notifications newer than the
//! newest this tab already knew when it loaded, and tagged with the event's id, so several open
//! tabs show one.

use crate::{
    api::notifications::list_notifications,
    auth::SessionResource,
    components::live::{use_event_ticks, EventTicks},
    error::AppError,
};
use leptos::prelude::*;
use leptos_router::components::A;
use policy::{auth::Permission, notify::NotificationPage};

/// The header's read of the signed-in person's notifications: `None` for people who may not
/// view routes (nothing is asked for them).
pub type HeaderNotifications = crate::codec::Resource<Result<Option<NotificationPage>, AppError>>;

/// Makes the header's [`HeaderNotifications`], and the browser's notification for each new
/// one. Called once, where the header is made: never inside the header's `Suspend`, which the
/// server may run more than once while it renders a page (a resource made there would be made,
/// and sent with the page, a varying number of times: the same page would never be the same
/// bytes, and its ETag would never match).
pub fn header_notifications(session: SessionResource) -> HeaderNotifications {
    // Every event and gap a page's stream sees: the list is read again.
    let ticks = use_event_ticks();
    let page = crate::codec::resource(
        move || ticks.map(EventTicks::get),
        move |_| async move {
            let views = matches!(
                session.await,
                Ok(v) if v.viewer.as_ref().is_some_and(|w| w.permissions.contains(Permission::ViewRoutes))
            );
            if views {
                list_notifications(None).await.map(Some)
            } else {
                Ok(None)
            }
        },
    );
    // The newest `seq` this tab has seen; browser notifications are only for newer ones.
    let newest = StoredValue::new(None::<u64>);
    Effect::new(move |_| {
        let Some(Ok(Some(p))) = page.get() else { return };
        let top = p.items.first().map_or(0, |n| n.seq);
        match newest.get_value() {
            // The first read: what was already there is not news.
            None => newest.set_value(Some(top)),
            Some(seen) => {
                for n in p.items.iter().filter(|n| n.seq > seen && !n.read) {
                    browser::show(&n.id, &n.summary);
                }
                newest.set_value(Some(seen.max(top)));
            }
        }
    });
    page
}

/// The header item. Rendered for people who may view routes.
#[component]
pub fn NotificationBell(
    /// What [`header_notifications`] reads.
    page: HeaderNotifications,
    /// The nav link's classes.
    #[prop(into)]
    class: String,
    /// Called when the link is followed (the phone menu closes).
    on_follow: Callback<()>,
) -> impl IntoView {
    let unread = move || page.get().and_then(Result::ok).flatten().map_or(0, |p| p.unread);
    let label = move || match unread() {
        0 => "Notifications".to_owned(),
        1 => "Notifications, 1 unread".to_owned(),
        n => format!("Notifications, {n} unread"),
    };
    view! {
        <A href="/notifications" attr:class=class attr:aria-label=label attr:data-testid="notifications-link" on:click=move |_| on_follow.run(())>
            "Notifications"
            <span
                data-testid="unread-count"
                aria-hidden="true"
                class="ml-2 inline-flex min-w-6 items-center justify-center rounded-full bg-indigo-700 px-1.5 text-xs font-semibold text-white"
                hidden=move || unread() == 0
            >
                {move || unread().to_string()}
            </span>
        </A>
    }
}

/// The browser's Notification API, in the browser only.
pub mod browser {
    /// Where the person stands on browser notifications.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Permission {
        /// The browser has no Notification API (or this is the server).
        Unsupported,
        /// Not asked yet.
        Default,
        Granted,
        Denied,
    }

    #[cfg(feature = "hydrate")]
    fn supported() -> bool {
        let window = leptos::prelude::window();
        web_sys::js_sys::Reflect::has(&window, &"Notification".into()).unwrap_or(false)
    }

    /// The current permission.
    pub fn permission() -> Permission {
        #[cfg(feature = "hydrate")]
        {
            if !supported() {
                return Permission::Unsupported;
            }
            match web_sys::Notification::permission() {
                web_sys::NotificationPermission::Granted => Permission::Granted,
                web_sys::NotificationPermission::Denied => Permission::Denied,
                _ => Permission::Default,
            }
        }
        #[cfg(not(feature = "hydrate"))]
        Permission::Unsupported
    }

    /// Asks the person (call it from a click); `then` gets the answer.
    pub fn request(then: impl FnOnce(Permission) + 'static) {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::{closure::Closure, JsCast};
            if !supported() {
                then(Permission::Unsupported);
                return;
            }
            let answer = Closure::once_into_js(move |_: wasm_bindgen::JsValue| then(permission()));
            let _ =
                web_sys::Notification::request_permission_with_permission_callback(answer.unchecked_ref());
        }
        #[cfg(not(feature = "hydrate"))]
        then(Permission::Unsupported);
    }

    /// Shows one notification, if the person allowed them; `tag` (the event's id) makes tabs
    /// showing the same one replace each other instead of stacking.
    pub fn show(tag: &str, text: &str) {
        #[cfg(feature = "hydrate")]
        {
            if permission() != Permission::Granted {
                return;
            }
            let options = web_sys::NotificationOptions::new();
            options.set_body(text);
            options.set_tag(tag);
            let _ = web_sys::Notification::new_with_options("Recourse", &options);
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (tag, text);
    }
}
