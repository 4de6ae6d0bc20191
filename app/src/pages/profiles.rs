//! Dynamic profiles: the list, and a form to create one (a name and its first candidate).

use crate::{
    api::profiles::{list_profiles, CreateProfile},
    components::{
        controls::{FieldMessage, FOCUS},
        status::{Empty, ErrorPanel, Loading},
    },
    error::AppError,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_navigate};
use policy::{
    api::ProfileInput,
    document::{validate_candidate_id, CandidatePolicy, PolicyDocument},
    limits::POLICY_DOCUMENT_VERSION,
};

#[component]
pub fn ProfilesPage() -> impl IntoView {
    let profiles = Resource::new(|| (), |_| list_profiles());
    view! {
        <Title text="Profiles" />
        <h1 class="text-2xl font-semibold">"Profiles"</h1>
        <p class="mt-1 text-slate-700">
            "A dynamic profile lists the candidates work may run on, in order. Each candidate has a policy for \
             transient errors (the provider is overloaded, a short rate limit) and one for hard errors (your \
             plan's usage limit is used up, the key was rejected)."
        </p>
        <Suspense fallback=|| view! { <Loading what="profiles" /> }>
            {move || Suspend::new(async move {
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
                                    .map(|p| {
                                        let href = format!("/profiles/{}", p.id);
                                        let routes = match p.open_routes {
                                            0 => "no open routes".to_owned(),
                                            1 => "1 open route".to_owned(),
                                            n => format!("{n} open routes"),
                                        };
                                        view! {
                                            <li class="rounded-lg border border-slate-300 bg-white p-4">
                                                <A
                                                    href=href
                                                    attr:class=format!(
                                                        "inline-flex min-h-11 items-center text-lg font-semibold text-indigo-800 underline {FOCUS}",
                                                    )
                                                >
                                                    {p.name.clone()}
                                                </A>
                                                <p class="text-sm text-slate-700">
                                                    {format!("Candidates: {}", p.candidate_ids.join(", "))}
                                                </p>
                                                <p class="text-sm text-slate-700">
                                                    {format!("Revision {} · {routes}", p.revision)}
                                                </p>
                                            </li>
                                        }
                                    })
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
        </Suspense>
        <NewProfile />
    }
    .into_any()
}

/// A name and a first candidate id; the new profile's page opens after it is created.
#[component]
fn NewProfile() -> impl IntoView {
    let create = ServerAction::<CreateProfile>::new();
    let name = RwSignal::new(String::new());
    let first = RwSignal::new(String::new());
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
    let navigate = use_navigate();
    Effect::new(move |_| match create.value().get() {
        Some(Ok(p)) => navigate(&format!("/profiles/{}", p.id), Default::default()),
        Some(Err(e)) => failure.set(Some(e)),
        None => {}
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        touched.set(true);
        if name_error.get_untracked().is_some() || first_error.get_untracked().is_some() {
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
                description: None,
                // No targets: the server gives the candidate an `external` target.
                targets: Vec::new(),
                policy,
                expected_revision: None,
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
                    <p role="alert" class="mt-2 text-sm font-medium text-red-700">
                        {move || failure.get().map(|e| e.to_string())}
                    </p>
                </div>
            </form>
        </section>
    }
    .into_any()
}
