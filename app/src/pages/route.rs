//! One route: where it is, why, what happens next, the manual actions, what the agent is
//! doing (`components::transcript`), its timeline (`components::timeline`) and its history. Kept
//! current by the event stream (reloaded on its events and after every gap in it); actions
//! carry the generation the person saw. The actions are offered only to someone who may steer
//! this route (`operate_routes`, or `assign_office` for an Office route); others read whose
//! they are.

use crate::{
    api::routes::{get_route, get_transcripts, ActOnRoute},
    auth::{holders, SessionResource},
    components::{
        controls::FOCUS,
        live::use_route_events_and_updates,
        route_view::{
            action_help, action_label, agent_own_retry_note, class_label, describe_code, next_outcome,
            state_label, DecisionView, StateBadge,
        },
        status::{ErrorPanel, Loading},
        time::{format_utc, Deadline},
        timeline::Timeline,
        transcript::Transcripts,
    },
    error::AppError,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_params_map};
use policy::{
    api::{HistoryEntry, RouteDetail},
    auth::{may_steer, Permission},
    wire::RouteSnapshot,
};

/// What the last manual action did, in words.
#[derive(Debug, Clone, PartialEq)]
enum ActionNote {
    Done(String),
    Problem(String),
}

crate::pages::lazy_page!(RoutePageRoute, RoutePage);
#[component]
pub fn RoutePage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let tick = RwSignal::new(0u64);
    // The agent's updates come often while it streams: one transcript read at a time, and one
    // more after it if updates arrived meanwhile.
    let updates = RwSignal::new(0u64);
    let reading = StoredValue::new(false);
    let again = StoredValue::new(false);
    // The stream's callbacks and the transcript read's continuation may run after the page
    // is gone (an event already on its way, a read that ends after a navigation): each touches
    // the page's values with `try_`, so a disposed page does nothing instead of panicking.
    let live = use_route_events_and_updates(
        move |route| {
            let Some(current) = id.try_get_untracked() else {
                return;
            };
            if route.is_none_or(|r| r == current) {
                tick.try_update(|t| *t += 1);
            }
        },
        move |route| {
            let Some(current) = id.try_get_untracked() else {
                return;
            };
            if route.is_some_and(|r| r == current) {
                if reading.try_get_value() == Some(true) {
                    again.try_set_value(true);
                } else {
                    updates.try_update(|u| *u += 1);
                }
            }
        },
    );
    // Reloaded on a change of this route, a retry, and every gap in the event stream.
    let detail = crate::codec::resource(
        move || (id.get(), tick.get(), live.gaps()),
        move |(id, _, gap)| live.reload(gap, get_route(id)),
    );
    let transcripts = crate::codec::resource(
        move || (id.get(), tick.get(), updates.get(), live.gaps()),
        move |(id, ..)| async move {
            reading.try_set_value(true);
            let read = get_transcripts(id).await;
            reading.try_set_value(false);
            if again.try_get_value() == Some(true) {
                again.try_set_value(false);
                updates.try_update(|u| *u += 1);
            }
            read
        },
    );
    let act = ServerAction::<ActOnRoute>::new();
    let session = expect_context::<SessionResource>();
    let note: RwSignal<Option<ActionNote>> = RwSignal::new(None);
    Effect::new(move |_| {
        let Some(result) = act.value().get() else { return };
        note.set(Some(match result {
            Ok(s) => ActionNote::Done(format!(
                "Done. The route is now: {} (generation {}).",
                state_label(s.state),
                s.generation
            )),
            Err(e @ AppError::RouteChanged { state, generation }) => ActionNote::Problem(format!(
                "{e} Current state: {} (generation {generation}).",
                state_label(state),
            )),
            Err(e) => ActionNote::Problem(e.to_string()),
        }));
        tick.update(|t| *t += 1);
    });

    view! {
        <Title text="Route" />
        <p>
            <A href="/" attr:class=format!("inline-flex min-h-11 items-center text-sm text-indigo-800 underline {FOCUS}")>
                "← All routes"
            </A>
        </p>
        <p class="text-xs text-slate-600" role="status" data-testid="live-status">{move || live.status().text()}</p>
        <Transition fallback=|| view! { <Loading what="the route" /> }>
            {move || Suspend::new(async move {
                let permissions = session.await.ok().and_then(|v| v.viewer).map(|w| w.permissions);
                match detail.await {
                    Ok(d) => {
                        let steer = permissions.is_some_and(|p| may_steer(p, d.route.caller.kind));
                        view! { <RouteDetailView detail=d act=act note=note steer=steer transcripts=transcripts /> }.into_any()
                    }
                    Err(e) => {
                        view! {
                            <h1 class="text-2xl font-semibold">"Route"</h1>
                            <ErrorPanel error=e retry=Callback::new(move |()| tick.update(|t| *t += 1)) />
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
    .into_any()
}

#[component]
fn RouteDetailView(
    detail: RouteDetail,
    act: ServerAction<ActOnRoute>,
    note: RwSignal<Option<ActionNote>>,
    /// Whether the signed-in person may steer this route.
    steer: bool,
    transcripts: crate::codec::Resource<Result<Vec<policy::transcript::AttemptTranscript>, AppError>>,
) -> impl IntoView {
    let timeline = detail.clone();
    let dispatches = detail.dispatches.clone();
    let dispatches_for_history = detail.dispatches.clone();
    let current_attempt = detail.route.snapshot.attempt.map(|a| a.number);
    let r = detail.route;
    let s: RouteSnapshot = r.snapshot.clone();
    let title = r.title.clone().unwrap_or_else(|| format!("Route {}", r.id));
    let code = s.code.clone();
    let route_id = StoredValue::new(r.id.clone());
    let generation = s.generation;
    let deadline = s.deadline;
    view! {
        <Title text=title.clone() />
        <h1 class="mt-2 break-words text-2xl font-semibold">{title}</h1>
        <p class="mt-1 text-sm text-slate-700">
            {format!("{} · {}", r.caller.kind.as_str(), r.caller.reference)} " · profile "
            <A href=format!("/profiles/{}", r.profile_id) attr:class=format!("inline-flex min-h-11 items-center text-indigo-800 underline {FOCUS}")>
                {r.profile_name.clone()}
            </A>
        </p>

        <section aria-labelledby="now-heading" class="mt-4 rounded-lg border border-slate-300 bg-white p-4" data-testid="route-now">
            <div class="flex flex-wrap items-center gap-2">
                <h2 id="now-heading" class="text-lg font-semibold">"Now"</h2>
                <StateBadge state=s.state />
                <span class="text-xs text-slate-600">{format!("generation {}", s.generation)}</span>
            </div>
            <dl class="mt-3 grid grid-cols-1 gap-x-4 gap-y-1 text-sm sm:grid-cols-[auto_1fr]">
                <dt class="font-medium text-slate-900">"Candidate"</dt>
                <dd class="break-words text-slate-800">
                    {format!("{} (position {}, cycle {})", s.candidate_id, s.candidate_index + 1, s.cycle)}
                </dd>
                <dt class="font-medium text-slate-900">"Class"</dt>
                <dd class="text-slate-800" data-testid="route-class">
                    {s.class.map(class_label).unwrap_or("No failure yet")}
                </dd>
                <dt class="font-medium text-slate-900">"Cause"</dt>
                <dd class="text-slate-800" data-testid="route-cause">
                    {match code {
                        Some(c) => {
                            view! {
                                {describe_code(&c)} " "
                                <code class="break-all rounded bg-slate-100 px-1 text-xs">{c.clone()}</code>
                            }
                                .into_any()
                        }
                        None => "No failure yet".into_any(),
                    }}
                </dd>
                <dt class="font-medium text-slate-900">"Retry"</dt>
                <dd class="text-slate-800" data-testid="route-retry">
                    {match (s.retry_ordinal, s.max_retries) {
                        (Some(k), Some(max)) => format!("retry {k} of {max}"),
                        (None, Some(max)) => format!("no retry pending (budget {max})"),
                        _ => "none".to_owned(),
                    }}
                </dd>
                <dt class="font-medium text-slate-900">"Next"</dt>
                <dd class="text-slate-800" data-testid="route-next">{next_outcome(&s)}</dd>
            </dl>
            // The storage error itself is server detail (it stays in the server's log); the page
            // says what it means for the route.
            {r.durable_error.map(|_| view! {
                <p role="alert" class="mt-2 text-sm font-medium text-red-800">
                    "The latest change could not be stored, so the route did nothing after it. Check the \
                     server's storage; the cause is in its log."
                </p>
            })}
            <h3 class="mt-4 text-sm font-semibold text-slate-900">"Deadline"</h3>
            <div class="mt-1">
                <Deadline at=Signal::derive(move || deadline) />
            </div>

            <h3 class="mt-4 text-sm font-semibold text-slate-900">"Actions"</h3>
            {if s.allowed_actions.is_empty() {
                view! { <p class="text-sm text-slate-700">"No action applies in this state."</p> }.into_any()
            } else if !steer {
                view! {
                    <p class="text-sm text-slate-700" data-testid="not-yours">
                        {format!("Acting on this route is for {}.", holders(Permission::OperateRoutes))}
                    </p>
                }
                    .into_any()
            } else {
                view! {
                    <ul class="mt-1 grid gap-2 sm:grid-cols-2">
                        {s
                            .allowed_actions
                            .iter()
                            .map(|&action| {
                                view! {
                                    <li>
                                        <button
                                            type="button"
                                            class=format!(
                                                "min-h-11 w-full rounded-md border border-indigo-700 bg-white px-4 text-sm font-semibold \
                                                 text-indigo-900 hover:bg-indigo-50 disabled:border-slate-300 disabled:text-slate-500 {FOCUS}",
                                            )
                                            disabled=move || act.pending().get()
                                            on:click=move |_| {
                                                note.set(None);
                                                act.dispatch(ActOnRoute {
                                                    route_id: route_id.get_value(),
                                                    action,
                                                    expected_generation: generation,
                                                });
                                            }
                                        >
                                            {action_label(action)}
                                        </button>
                                        <p class="mt-1 text-xs text-slate-600">{action_help(action)}</p>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
            <div aria-live="polite" data-testid="action-note">
                {move || match note.get() {
                    Some(ActionNote::Done(t)) => {
                        view! { <p class="mt-3 rounded-md bg-emerald-50 p-2 text-sm text-emerald-900">{t}</p> }.into_any()
                    }
                    Some(ActionNote::Problem(t)) => {
                        view! { <p role="alert" class="mt-3 rounded-md bg-amber-50 p-2 text-sm text-amber-900">{t}</p> }.into_any()
                    }
                    None => ().into_any(),
                }}
            </div>
        </section>

        <Transcripts transcripts=transcripts dispatches=dispatches current=current_attempt />

        <Timeline detail=timeline />

        <History entries=detail.history dispatches=dispatches_for_history />
    }
    .into_any()
}

#[component]
fn History(entries: Vec<HistoryEntry>, dispatches: Vec<policy::api::DispatchRecord>) -> impl IntoView {
    let count = entries.len();
    view! {
        <section aria-labelledby="history-heading" class="mt-6">
            <h2 id="history-heading" class="text-lg font-semibold">"History"</h2>
            <p class="text-sm text-slate-700">
                "Every accepted change, oldest first, with the policy each decision used at the time. Later \
                 profile edits never rewrite it."
            </p>
            {if count == 0 {
                view! { <p class="mt-2 text-sm text-slate-700">"Nothing has happened yet."</p> }.into_any()
            } else {
                view! {
                    <ol class="mt-3 space-y-3" data-testid="history">
                        {entries
                            .into_iter()
                            .map(|e| {
                                let from = e.from.map(state_label).unwrap_or("(new)");
                                let own_retries = agent_own_retry_note(&e, &dispatches);
                                view! {
                                    <li class="min-w-0 rounded-lg border border-slate-300 bg-white p-3">
                                        <p class="text-sm font-semibold text-slate-900">
                                            {format!("{}. {} → {}", e.seq, from, state_label(e.to))}
                                        </p>
                                        <p class="text-xs text-slate-600">
                                            {format!(
                                                "{} · {} · candidate {} · generation {}{} · profile revision {}",
                                                format_utc(e.at),
                                                e.event.as_str(),
                                                e.candidate_id,
                                                e.generation,
                                                e.attempt.map(|a| format!(" · attempt {a}")).unwrap_or_default(),
                                                e.profile_revision,
                                            )}
                                        </p>
                                        {own_retries.map(|note| view! {
                                            <p class="mt-2 text-sm text-slate-800" data-testid="agent-own-retries">{note}</p>
                                        })}
                                        {e.decision.map(|d| view! { <div class="mt-2"><DecisionView decision=d /></div> })}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ol>
                }
                    .into_any()
            }}
        </section>
    }
    .into_any()
}
