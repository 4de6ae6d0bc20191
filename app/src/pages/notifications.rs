//! The signed-in person's notifications: what happened to routes and providers, newest first,
//! unread ones marked, live (a new one appears without a reload); "Mark all as read"; the
//! browser's own notifications, switched on by the person; and the deliveries to configured
//! channels that failed for good (dead), which the server no longer tries.

use crate::{
    api::notifications::{list_deliveries, list_notifications, MarkNotificationsRead},
    components::{
        controls::FOCUS,
        live::{use_event_ticks, use_route_events},
        notify_bell::browser::{self, Permission},
        status::{Empty, ErrorPanel, Loading},
        time::format_utc,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use policy::notify::{DeliveryStatus, DeliveryView, NotificationView};

crate::pages::lazy_page!(NotificationsRoute, NotificationsPage);
#[component]
pub fn NotificationsPage() -> impl IntoView {
    let changes = RwSignal::new(0u64);
    let live = use_route_events(move |_| changes.update(|n| *n += 1));
    let mark = ServerAction::<MarkNotificationsRead>::new();
    // Once marked, the header's unread count is read again too (it rereads on every tick).
    let ticks = use_event_ticks();
    Effect::new(move |seen: Option<usize>| {
        let now = mark.version().get();
        if seen.is_some_and(|s| s != now) {
            if let Some(t) = ticks {
                t.bump();
            }
        }
        now
    });
    let page = crate::codec::resource(
        move || (changes.get(), live.gaps(), mark.version().get()),
        move |(_, gap, _)| async move { live.reload(gap, list_notifications(None)).await },
    );
    let dead = crate::codec::resource(
        move || (changes.get(), live.gaps()),
        |_| list_deliveries(Some(DeliveryStatus::Dead)),
    );
    view! {
        <Title text="Notifications" />
        <h1 class="text-2xl font-semibold">"Notifications"</h1>
        <p class="mt-1 text-slate-700">
            "When a route needs a person, switches candidates, waits a long time or finishes, and when a provider \
             is down or back, as each profile's notification rules say."
        </p>
        <p role="status" class="mt-2 text-sm text-slate-600" data-testid="live-status">
            {move || live.status().text()}
        </p>
        <BrowserNotifications />
        <Transition fallback=|| view! { <Loading what="your notifications" /> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(p) if p.items.is_empty() => {
                        view! {
                            <Empty id="no-notifications" title="Nothing yet">
                                <p>"Notifications appear here when a profile's rules send them to the in-app list."</p>
                            </Empty>
                        }
                            .into_any()
                    }
                    Ok(p) => {
                        let newest = p.items.first().map_or(0, |n| n.seq);
                        let unread = p.unread;
                        view! {
                            <div class="mt-4 flex flex-wrap items-center gap-3">
                                <p class="text-sm text-slate-700" data-testid="unread-summary">
                                    {match unread {
                                        0 => "All read.".to_owned(),
                                        1 => "1 unread.".to_owned(),
                                        n => format!("{n} unread."),
                                    }}
                                </p>
                                <button
                                    type="button"
                                    class=format!("min-h-11 rounded-md border border-slate-400 bg-white px-4 text-sm font-medium {FOCUS}")
                                    disabled=move || unread == 0 || mark.pending().get()
                                    on:click=move |_| {
                                        mark.dispatch(MarkNotificationsRead { through_seq: newest });
                                    }
                                >
                                    "Mark all as read"
                                </button>
                            </div>
                            <ol class="mt-4 space-y-2" data-testid="notification-list">
                                {p.items.into_iter().map(|n| view! { <NotificationRow n=n /> }).collect_view()}
                            </ol>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorPanel error=e retry=Callback::new(move |()| page.refetch()) /> }.into_any(),
                }
            })}
        </Transition>
        <section aria-labelledby="dead-heading" class="mt-8">
            <h2 id="dead-heading" class="text-lg font-semibold">"Deliveries that failed for good"</h2>
            <p class="mt-1 text-sm text-slate-700">
                "A webhook or e-mail whose every attempt failed (the server retried with growing pauses). \
                 Nothing more is tried; the receiver never got it."
            </p>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match dead.await {
                        Ok(rows) if rows.is_empty() => {
                            view! { <p class="mt-2 text-sm text-slate-700" data-testid="no-dead">"None."</p> }.into_any()
                        }
                        Ok(rows) => {
                            view! {
                                <ul class="mt-2 space-y-2" data-testid="dead-list">
                                    {rows.into_iter().map(|d| view! { <DeadRow d=d /> }).collect_view()}
                                </ul>
                            }
                                .into_any()
                        }
                        Err(e) => view! { <ErrorPanel error=e /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
    .into_any()
}

#[component]
fn NotificationRow(n: NotificationView) -> impl IntoView {
    let class = if n.read {
        "min-w-0 rounded-lg border border-slate-300 bg-white p-3 text-sm"
    } else {
        "min-w-0 rounded-lg border border-indigo-400 bg-indigo-50 p-3 text-sm"
    };
    let href = format!("/routes/{}", n.route_id);
    view! {
        <li class=class data-testid="notification" data-type=n.event.as_str() data-read=n.read.to_string()>
            <p class="break-words font-medium">
                {(!n.read).then(|| view! { <span class="sr-only">"Unread: "</span> })}
                {n.summary}
            </p>
            <p class="mt-1 flex flex-wrap items-center gap-x-3 text-slate-700">
                <span>{format_utc(n.at)}</span>
                <span>{n.event.as_str()}</span>
                <A href=href attr:class=format!("inline-flex min-h-11 items-center text-indigo-800 underline {FOCUS}")>
                    "Open the route"
                </A>
            </p>
        </li>
    }
}

#[component]
fn DeadRow(d: DeliveryView) -> impl IntoView {
    view! {
        <li class="min-w-0 rounded-lg border border-red-300 bg-red-50 p-3 text-sm" data-testid="dead-delivery">
            <p class="break-words font-medium">
                {format!("{} to channel {} · {} attempts", d.event.as_str(), d.channel_id, d.attempts)}
            </p>
            <p class="break-words text-slate-800">
                {format!("{} · route {} · {}", format_utc(d.at), d.route_id, d.last_error.unwrap_or_default())}
            </p>
        </li>
    }
}

/// The switch for the browser's own notifications: asked for only when the person presses it.
#[component]
fn BrowserNotifications() -> impl IntoView {
    // `None` on the server and before hydration: the browser is not known yet.
    let permission = RwSignal::new(None::<Permission>);
    Effect::new(move |_| permission.set(Some(browser::permission())));
    view! {
        <div class="mt-3 rounded-lg border border-slate-300 bg-white p-3 text-sm" data-testid="browser-notifications">
            {move || match permission.get() {
                None => view! { <p>"Browser notifications can be switched on once the page is live."</p> }.into_any(),
                Some(Permission::Unsupported) => {
                    view! { <p>"This browser cannot show notifications; this list still updates live."</p> }.into_any()
                }
                Some(Permission::Granted) => {
                    view! { <p>"This browser shows a notification for each new one while a Recourse tab is open."</p> }
                        .into_any()
                }
                Some(Permission::Denied) => {
                    view! {
                        <p>"Browser notifications are blocked for this site; allow them in the browser's site settings."</p>
                    }
                        .into_any()
                }
                Some(Permission::Default) => {
                    view! {
                        <button
                            type="button"
                            class=format!("min-h-11 rounded-md border border-indigo-700 bg-white px-4 font-semibold text-indigo-800 {FOCUS}")
                            on:click=move |_| browser::request(move |p| permission.set(Some(p)))
                        >
                            "Show browser notifications while a Recourse tab is open"
                        </button>
                    }
                        .into_any()
                }
            }}
        </div>
    }
}
