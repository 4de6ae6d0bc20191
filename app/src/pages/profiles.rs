//! Dynamic profiles: the list (each profile can be deleted after a confirmation), and a form to
//! create one (a name and its first candidate, with the dispatcher that reaches it and, for
//! `acp` and `http`, the configured agent or endpoint that runs it).
//!
//! Deleting asks first, in place: the row's Delete button turns into a question with "Delete"
//! and "Keep" buttons, focus moves to "Keep" (the harmless answer), and Escape or "Keep" puts
//! focus back on Delete. The server may refuse (it keeps a profile that routes used, so their
//! history stays readable); its reason is shown on the row. After a deletion the list is read
//! again and the outcome is announced. Deleting and creating are offered only to those who
//! manage profiles; others read whose they are.

use crate::{
    api::{
        profiles::{list_profiles, CreateProfile, DeleteProfile},
        runners::list_runners,
    },
    auth::{holders, manages_profiles, IfAllowed, SessionResource},
    components::{
        controls::{FieldMessage, FOCUS},
        dispatcher_choice::DispatcherChoice,
        profile_editor::focus_later,
        status::{Empty, ErrorPanel, Loading},
    },
    configured::Configured,
    draft::TargetDraft,
    error::AppError,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_navigate};
use policy::{
    api::{ProfileInput, ProfileSummary, RunnerOption},
    auth::Permission,
    document::{validate_candidate_id, CandidatePolicy, PolicyDocument},
    limits::POLICY_DOCUMENT_VERSION,
};

crate::pages::lazy_page!(ProfilesRoute, ProfilesPage);
#[component]
pub fn ProfilesPage() -> impl IntoView {
    let profiles = crate::codec::resource(|| (), |_| list_profiles());
    // Made here, with the page, not inside the permission check's `Suspend`: a resource created
    // while an async block renders is not one the server's render reliably waits for.
    let runners = crate::codec::resource(|| (), |()| list_runners());
    let session = expect_context::<SessionResource>();
    // What the last deletion did, announced above the list.
    let deleted: RwSignal<Option<String>> = RwSignal::new(None);
    let on_deleted = Callback::new(move |name: String| {
        deleted.set(Some(format!("Deleted profile {name}.")));
        profiles.refetch();
        focus_later("profiles-status".to_owned());
    });
    view! {
        <Title text="Profiles" />
        <h1 class="text-2xl font-semibold">"Profiles"</h1>
        <p class="mt-1 text-slate-700">
            "A dynamic profile lists the candidates work may run on, in order. Each candidate has a policy for \
             transient errors (the provider is overloaded, a short rate limit) and one for hard errors (your \
             plan's usage limit is used up, the key was rejected)."
        </p>
        <p
            id="profiles-status"
            tabindex="-1"
            role="status"
            class="mt-3 text-sm font-medium text-emerald-900 empty:hidden"
            data-testid="profiles-status"
        >
            {move || deleted.get()}
        </p>
        <Transition fallback=|| view! { <Loading what="profiles" /> }>
            {move || Suspend::new(async move {
                let manage = matches!(session.await, Ok(v) if v.viewer.as_ref().is_some_and(|w| manages_profiles(w.permissions)));
                match profiles.await {
                    Ok(list) if list.is_empty() => {
                        view! {
                            <Empty id="empty-profiles" title="No profiles yet">
                                <p>"Create one below; you can add more candidates and set their policies on its page."</p>
                            </Empty>
                        }
                            .into_any()
                    }
                    Ok(list) => {
                        view! {
                            <ul class="mt-6 space-y-3" data-testid="profile-list">
                                {list
                                    .into_iter()
                                    .map(|p| view! { <ProfileItem profile=p on_deleted=on_deleted manage=manage /> })
                                    .collect_view()}
                            </ul>
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! { <ErrorPanel error=e retry=Callback::new(move |()| profiles.refetch()) /> }.into_any()
                    }
                }
            })}
        </Transition>
        <IfAllowed
            allowed=manages_profiles
            note=format!("Creating and deleting profiles is for {}.", holders(Permission::ManageProfiles))
        >
            <NewProfileSection runners=runners />
        </IfAllowed>
    }
    .into_any()
}

/// One profile in the list: its link, its candidates and routes, and Delete with its
/// confirmation.
#[component]
fn ProfileItem(
    profile: ProfileSummary,
    on_deleted: Callback<String>,
    /// Whether the signed-in person manages profiles (only then is Delete offered).
    manage: bool,
) -> impl IntoView {
    let p = profile;
    let href = format!("/profiles/{}", p.id);
    let open = match p.open_routes {
        0 => "no open routes".to_owned(),
        1 => "1 open route".to_owned(),
        n => format!("{n} open routes"),
    };
    // A profile with routes is kept so their history stays readable: say so before Delete.
    let routes = match p.routes {
        0 => open,
        1 => format!("{open} · 1 route in all; kept while it has routes"),
        n => format!("{open} · {n} routes in all; kept while it has routes"),
    };
    let delete = ServerAction::<DeleteProfile>::new();
    let confirming = RwSignal::new(false);
    let failure: RwSignal<Option<String>> = RwSignal::new(None);
    let id = StoredValue::new(p.id.clone());
    let name = StoredValue::new(p.name.clone());
    let base = format!("delete-{}", p.id);
    let delete_id = StoredValue::new(base.clone());
    let keep_id = StoredValue::new(format!("{base}-keep"));
    let question_id = format!("{base}-question");
    let labelled_by = question_id.clone();
    let sr_name = format!(" profile {}", p.name);
    let question = format!("Delete profile {}? This cannot be undone.", p.name);
    let error_id = format!("{base}-error");
    Effect::new(move |_| match delete.value().get() {
        Some(Ok(())) => {
            confirming.set(false);
            on_deleted.run(name.get_value());
        }
        Some(Err(e)) => {
            confirming.set(false);
            failure.set(Some(match e {
                AppError::Conflict { message } => format!("Not deleted: {message}."),
                AppError::NotFound => "Not deleted: it was already gone. The list is read again.".to_owned(),
                other => format!("Not deleted: {other}"),
            }));
            focus_later(delete_id.get_value());
        }
        None => {}
    });
    let ask = move |_| {
        failure.set(None);
        confirming.set(true);
        focus_later(keep_id.get_value());
    };
    let keep = move || {
        confirming.set(false);
        focus_later(delete_id.get_value());
    };
    let button = "min-h-11 rounded-md border px-4 text-sm font-semibold disabled:border-slate-300 disabled:text-slate-500";
    view! {
        <li class="min-w-0 rounded-lg border border-slate-300 bg-white p-4" data-profile-id=p.id.clone()>
            <div class="flex flex-wrap items-start justify-between gap-2">
                <div class="min-w-0">
                    <A
                        href=href
                        attr:class=format!(
                            "inline-flex min-h-11 items-center break-all text-lg font-semibold text-indigo-800 underline {FOCUS}",
                        )
                    >
                        {p.name.clone()}
                    </A>
                    <p class="break-words text-sm text-slate-700">
                        {format!("Candidates: {}", p.candidate_ids.join(", "))}
                    </p>
                    <p class="text-sm text-slate-700">{format!("Revision {} · {routes}", p.revision)}</p>
                </div>
                {manage
                    .then(|| {
                        view! {
                            <button
                                type="button"
                                id=base.clone()
                                class=format!("{button} border-red-800 bg-white text-red-800 hover:bg-red-50 {FOCUS}")
                                aria-describedby=error_id.clone()
                                hidden=move || confirming.get()
                                on:click=ask
                            >
                                "Delete"
                                <span class="sr-only">{sr_name}</span>
                            </button>
                        }
                    })}
            </div>
            <div
                role="group"
                aria-labelledby=labelled_by
                class="mt-3 rounded-md border border-red-300 bg-red-50 p-3"
                hidden=move || !confirming.get()
                on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                    if ev.key() == "Escape" {
                        ev.prevent_default();
                        keep();
                    }
                }
            >
                <p id=question_id class="text-sm font-medium text-red-900">
                    {question}
                </p>
                <div class="mt-2 flex flex-wrap gap-2">
                    <button
                        type="button"
                        class=format!("{button} border-red-800 bg-red-800 text-white hover:bg-red-900 disabled:bg-slate-500 {FOCUS}")
                        disabled=move || delete.pending().get()
                        on:click=move |_| {
                            delete.dispatch(DeleteProfile { id: id.get_value() });
                        }
                    >
                        {move || if delete.pending().get() { "Deleting…" } else { "Yes, delete it" }}
                    </button>
                    <button
                        type="button"
                        id=keep_id.get_value()
                        class=format!("{button} border-slate-500 bg-white text-slate-900 hover:bg-slate-100 {FOCUS}")
                        on:click=move |_| keep()
                    >
                        "Keep it"
                    </button>
                </div>
            </div>
            <p id=error_id role="alert" class="mt-2 text-sm font-medium text-red-800 empty:hidden">
                {move || failure.get()}
            </p>
        </li>
    }
    .into_any()
}

/// The new-profile form, once the server's configuration (what its dispatcher may be) is known.
#[component]
fn NewProfileSection(runners: crate::codec::Resource<Result<Vec<RunnerOption>, AppError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| view! { <Loading what="the server's agents and endpoints" /> }>
            {move || Suspend::new(async move {
                match runners.await {
                    Ok(list) => view! { <NewProfile runners=list /> }.into_any(),
                    Err(e) => {
                        view! {
                            <section aria-labelledby="new-profile" class="mt-8">
                                <h2 id="new-profile" class="text-lg font-semibold">"New profile"</h2>
                                <ErrorPanel error=e retry=Callback::new(move |()| runners.refetch()) />
                            </section>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
    .into_any()
}

/// A name and a first candidate id; the new profile's page opens after it is created.
#[component]
fn NewProfile(runners: Vec<RunnerOption>) -> impl IntoView {
    let configured = StoredValue::new(Configured::new(runners));
    let create = ServerAction::<CreateProfile>::new();
    let name = RwSignal::new(String::new());
    let first = RwSignal::new(String::new());
    // How the first candidate is reached: `external` unless the person picks another.
    let target = TargetDraft::external("");
    let touched = RwSignal::new(false);
    let name_error = Signal::derive(move || {
        (touched.get() && name.with(|n| n.trim().is_empty())).then(|| "Name cannot be empty.".to_owned())
    });
    let first_error = Signal::derive(move || {
        if !touched.get() {
            return None;
        }
        first.with(|id| validate_candidate_id(id).err().map(|e| e.message))
    });
    let failure: RwSignal<Option<AppError>> = RwSignal::new(None);
    // The server's message for the runner (a 422 at `targets[0].runner`), on its select.
    let server_runner = Signal::derive(move || {
        failure.with(|f| {
            f.as_ref()
                .and_then(|e| e.at("targets[0].runner").next().map(|e| e.message.clone()))
        })
    });
    let runner_problem = Signal::derive(move || configured.with_value(|c| target.problem(c)));
    let navigate = use_navigate();
    Effect::new(move |_| match create.value().get() {
        Some(Ok(p)) => navigate(&format!("/profiles/{}", p.id), Default::default()),
        Some(Err(e)) => failure.set(Some(e)),
        None => {}
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        touched.set(true);
        if name_error.get_untracked().is_some()
            || first_error.get_untracked().is_some()
            || runner_problem.get_untracked().is_some()
        {
            return;
        }
        let id = first.get_untracked().trim().to_owned();
        let doc = PolicyDocument {
            version: POLICY_DOCUMENT_VERSION,
            candidates: vec![CandidatePolicy::with_defaults(&id)],
        };
        let Ok(policy) = serde_json::to_value(&doc) else {
            return;
        };
        failure.set(None);
        create.dispatch(CreateProfile {
            input: ProfileInput {
                name: name.get_untracked().trim().to_owned(),
                kind: policy::api::ProfileKind::Dynamic,
                description: None,
                // The target the person chose (and saw), not a silent server default.
                targets: target.target(&id).into_iter().collect(),
                policy,
                expected_revision: None,
                notifications: Vec::new(),
            },
        });
    };
    let input_class =
        format!("mt-1 h-11 w-full rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}");
    view! {
        <section aria-labelledby="new-profile" class="mt-8 rounded-lg border border-slate-300 bg-white p-4">
            <h2 id="new-profile" class="text-lg font-semibold">"New profile"</h2>
            <form on:submit=on_submit novalidate class="mt-3 grid gap-3 sm:grid-cols-2">
                <div>
                    <label for="new-profile-name" class="block text-sm font-medium">"Name"</label>
                    <input
                        id="new-profile-name"
                        type="text"
                        autocomplete="off"
                        class=input_class.clone()
                        aria-describedby="new-profile-name-error"
                        aria-invalid=move || name_error.with(Option::is_some).to_string()
                        value=move || name.get()
                        prop:value=move || name.get()
                        on:input=move |ev| name.set(event_target_value(&ev))
                    />
                    <FieldMessage id="new-profile-name-error" message=name_error />
                </div>
                <div>
                    <label for="new-profile-first" class="block text-sm font-medium">"First candidate id"</label>
                    <input
                        id="new-profile-first"
                        type="text"
                        autocomplete="off"
                        placeholder="e.g. claude-main"
                        class=input_class
                        aria-describedby="new-profile-first-error"
                        aria-invalid=move || first_error.with(Option::is_some).to_string()
                        value=move || first.get()
                        prop:value=move || first.get()
                        on:input=move |ev| first.set(event_target_value(&ev))
                    />
                    <FieldMessage id="new-profile-first-error" message=first_error />
                </div>
                <DispatcherChoice
                    target=target
                    configured=configured
                    prefix="new-profile"
                    labels=("Its dispatcher", "Its")
                    server_runner=server_runner
                    on_edit=Callback::new(move |()| failure.set(None))
                    hint_suffix="Provider, model and label are set on the profile's page."
                />
                <div class="sm:col-span-2">
                    <button
                        type="submit"
                        class=format!(
                            "min-h-11 rounded-md bg-indigo-700 px-5 text-sm font-semibold text-white hover:bg-indigo-800 \
                             disabled:bg-slate-500 {FOCUS}",
                        )
                        disabled=move || create.pending().get()
                    >
                        {move || if create.pending().get() { "Creating…" } else { "Create profile" }}
                    </button>
                    <div role="alert" class="mt-2 text-sm font-medium text-red-700">
                        <p>{move || failure.get().map(|e| e.to_string())}</p>
                        // Every server message, so one whose field is not on this form is never lost.
                        <ul class="list-disc pl-5 font-normal">
                            {move || {
                                failure
                                    .get()
                                    .into_iter()
                                    .flat_map(|e| match e {
                                        AppError::Invalid { errors } => errors,
                                        _ => Vec::new(),
                                    })
                                    .map(|e| view! { <li class="break-words">{format!("{}: {}", e.path, e.message)}</li> })
                                    .collect_view()
                            }}
                        </ul>
                    </div>
                </div>
            </form>
        </section>
    }
    .into_any()
}
