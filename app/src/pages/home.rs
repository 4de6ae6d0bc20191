//! The routes overview: routed work and how each route is recovering, filtered by caller and
//! state through the address (`/?caller=office&state=retry_wait`), so a filtered view can be
//! bookmarked, survives a reload and works before the page is live. Kept current by the event
//! stream (reloaded on its events and after every gap in it).
//!
//! Without a `state` parameter the list shows open routes only (`state=open`): completed and
//! abandoned routes need nobody. `state=all` shows every route.

use crate::{
    api::routes::{list_routes, RouteQuery, StateScope},
    components::{
        controls::FOCUS,
        disclosure::Disclosure,
        live::use_route_events,
        route_view::{class_label, describe_code, next_outcome, state_label, StateBadge},
        status::{Empty, ErrorPanel, Loading},
        time::format_utc,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    components::{Form, A},
    hooks::use_query_map,
};
use policy::{api::CallerKind, wire::StateName};

fn caller_label(kind: CallerKind) -> &'static str {
    match kind {
        CallerKind::KanbanTask => "Kanban task",
        CallerKind::Workflow => "Workflow step",
        CallerKind::Utility => "Utility call",
        CallerKind::Office => "Office assignment",
        CallerKind::Editor => "Editor session",
    }
}

crate::pages::lazy_page!(HomeRoute, HomePage);
#[component]
pub fn HomePage() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| {
        query.with(|q| RouteQuery {
            caller_kind: q.get("caller").and_then(|c| CallerKind::parse(&c)),
            caller_reference: q.get("reference").filter(|r| !r.trim().is_empty()),
            states: StateScope::from_query(q.get("state").as_deref()),
        })
    });
    let tick = RwSignal::new(0u64);
    let live = use_route_events(move |_| tick.update(|t| *t += 1));
    // Reloaded on any route change, a retry, and every gap in the event stream.
    let routes = crate::codec::resource(
        move || (filter.get(), tick.get(), live.gaps()),
        move |(f, _, gap)| live.reload(gap, list_routes(f)),
    );
    let filtered = move || filter.with(|f| f != &RouteQuery::default());
    let scope_option = move |scope: StateScope, label: &'static str| {
        view! {
            <option value=scope.query_value() selected=move || filter.with(|f| f.states == scope)>
                {label}
            </option>
        }
    };
    let select_class =
        format!("mt-1 h-11 w-full rounded-md border border-slate-400 bg-white px-2 text-base {FOCUS}");

    view! {
        <Title text="Routes" />
        <h1 class="text-2xl font-semibold">"Routes"</h1>
        <p class="mt-1 text-slate-700">"Routed agent work and how each route is recovering from provider failures."</p>

        <Form method="GET" action="/">
            <fieldset class="mt-4 grid gap-3 rounded-lg border border-slate-300 bg-white p-4 sm:grid-cols-4 sm:items-end">
                <legend class="px-1 text-sm font-semibold text-slate-900">"Filter"</legend>
                <div>
                    <label for="filter-caller" class="block text-sm font-medium">"Caller"</label>
                    <select id="filter-caller" name="caller" class=select_class.clone()>
                        <option value="" selected=move || filter.with(|f| f.caller_kind.is_none())>"Any caller"</option>
                        {CallerKind::ALL
                            .into_iter()
                            .map(|k| {
                                view! {
                                    <option value=k.as_str() selected=move || filter.with(|f| f.caller_kind == Some(k))>
                                        {caller_label(k)}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </div>
                <div>
                    <label for="filter-reference" class="block text-sm font-medium">"Caller reference"</label>
                    <input
                        id="filter-reference"
                        name="reference"
                        type="text"
                        autocomplete="off"
                        class=select_class.clone()
                        value=move || filter.with(|f| f.caller_reference.clone().unwrap_or_default())
                        prop:value=move || filter.with(|f| f.caller_reference.clone().unwrap_or_default())
                    />
                </div>
                <div>
                    <label for="filter-state" class="block text-sm font-medium">"State"</label>
                    <select id="filter-state" name="state" class=select_class.clone()>
                        {scope_option(StateScope::Open, "Open (not finished)")}
                        {scope_option(StateScope::All, "All, finished included")}
                        {StateName::ALL
                            .into_iter()
                            .map(|s| scope_option(StateScope::Only(s), state_label(s)))
                            .collect_view()}
                    </select>
                </div>
                <div class="flex gap-2">
                    <button
                        type="submit"
                        class=format!(
                            "min-h-11 flex-1 rounded-md bg-indigo-700 px-4 text-sm font-semibold text-white hover:bg-indigo-800 {FOCUS}",
                        )
                    >
                        "Apply filter"
                    </button>
                    <A
                        href="/"
                        attr:class=format!(
                            "inline-flex min-h-11 items-center rounded-md border border-slate-400 px-3 text-sm font-medium text-slate-800 {FOCUS}",
                        )
                    >
                        "Clear"
                    </A>
                </div>
            </fieldset>
        </Form>
        <p class="mt-2 text-xs text-slate-600" role="status" data-testid="live-status">{move || live.status().text()}</p>

        <Transition fallback=|| view! { <Loading what="routes" /> }>
            {move || Suspend::new(async move {
                match routes.await {
                    Ok(list) if list.is_empty() => {
                        if filtered() {
                            view! {
                                <Empty id="empty-routes" title="No routes match this filter">
                                    <p>"Try another caller or state, or clear the filter."</p>
                                </Empty>
                            }
                                .into_any()
                        } else {
                            view! {
                                <Empty id="empty-routes" title="No open routes">
                                    <p>
                                        "When a caller starts work on a dynamic profile, its route appears here with its state, \
                                         the failure class, the retry ordinal and the next deadline. Finished routes are \
                                         listed under the state filter's \"All\"."
                                    </p>
                                </Empty>
                            }
                                .into_any()
                        }
                    }
                    Ok(list) => {
                        view! {
                            <ul class="mt-4 space-y-3" data-testid="route-list">
                                {list
                                    .into_iter()
                                    .map(|r| {
                                        let s = r.snapshot;
                                        let title = r.title.clone().unwrap_or_else(|| format!("Route {}", r.id));
                                        let cause = s
                                            .code
                                            .as_deref()
                                            .map(|c| format!("{} ({c})", describe_code(c)))
                                            .unwrap_or_else(|| "no failure".to_owned());
                                        view! {
                                            <li class="min-w-0 rounded-lg border border-slate-300 bg-white p-4" data-route-id=r.id.clone()>
                                                <div class="flex flex-wrap items-center gap-2">
                                                    <A
                                                        href=format!("/routes/{}", r.id)
                                                        attr:class=format!(
                                                            "inline-flex min-h-11 items-center break-all font-semibold text-indigo-800 underline {FOCUS}",
                                                        )
                                                    >
                                                        {title}
                                                    </A>
                                                    <StateBadge state=s.state />
                                                </div>
                                                <p class="text-sm text-slate-700">
                                                    {format!(
                                                        "{}: {} · profile {} · candidate {}",
                                                        caller_label(r.caller.kind),
                                                        r.caller.reference,
                                                        r.profile_name,
                                                        s.candidate_id,
                                                    )}
                                                </p>
                                                <p class="text-sm text-slate-700">
                                                    {s.class.map(class_label).map(|c| format!("{c}: {cause}"))}
                                                    {s.deadline.map(|d| format!(" · deadline {}", format_utc(d)))}
                                                    {s.hold.as_ref().map(|h| format!(" · held by {} until {}", h.circuit, format_utc(h.until)))}
                                                </p>
                                                <p class="text-sm text-slate-800">{next_outcome(&s)}</p>
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ul>
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! { <ErrorPanel error=e retry=Callback::new(move |()| tick.update(|t| *t += 1)) /> }.into_any()
                    }
                }
            })}
        </Transition>

        <div class="mt-6">
            <Disclosure id="how-recourse-decides" label="How Recourse decides what to do after a failure">
                <ol class="list-decimal space-y-1 pl-5">
                    <li>"Evidence from the agent or API is classified into a stable code and a class: transient or hard."</li>
                    <li>"Only a current failure that happened before any output or tool activity may recover automatically; anything else waits for a person."</li>
                    <li>"The candidate's policy for that class decides: wait for a trusted reset, retry with exponential backoff, then skip to the next candidate or stop."</li>
                    <li>"Every decision is stored before it is acted on, so timers survive restarts and nothing is dispatched twice."</li>
                </ol>
            </Disclosure>
        </div>
    }
    .into_any()
}
