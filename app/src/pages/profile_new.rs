//! The form that creates a profile (`/profiles/new`): a name and its first candidate, with the
//! dispatcher that reaches it and, for `acp` and `http`, the configured agent or endpoint that
//! runs it. The new profile's editor opens once it is created. It is shown by the profile
//! editor's lazy route ([`super::profile_edit`]), so its code loads with the editor's: the two
//! share most of it (the dispatcher choice, the configuration's runners, the policy types).

use crate::{
    api::{profiles::CreateProfile, runners::list_runners},
    auth::{holders, manages_profiles, SessionResource},
    components::{
        controls::{FieldMessage, ServerMessageList, FOCUS},
        dispatcher_choice::DispatcherChoice,
        status::{ErrorPanel, Loading},
    },
    configured::Configured,
    draft::TargetDraft,
    error::AppError,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_navigate};
use policy::{
    api::{ProfileInput, RunnerOption},
    auth::Permission,
    document::{validate_candidate_id, CandidatePolicy, PolicyDocument},
    limits::POLICY_DOCUMENT_VERSION,
};

/// The page: the form for those who manage profiles, whose it is for the others.
#[component]
pub fn NewProfilePage() -> impl IntoView {
    let runners = crate::codec::resource(|| (), |()| list_runners());
    let session = expect_context::<SessionResource>();
    view! {
        <Title text="New profile" />
        <p>
            <A href="/profiles" attr:class=format!("inline-flex min-h-11 items-center text-sm text-indigo-800 underline {FOCUS}")>
                "← All profiles"
            </A>
        </p>
        <h1 class="text-2xl font-semibold">"New profile"</h1>
        <Suspense fallback=|| view! { <Loading what="the server's agents and endpoints" /> }>
            {move || Suspend::new(async move {
                let manage = matches!(session.await, Ok(v) if v.viewer.as_ref().is_some_and(|w| manages_profiles(w.permissions)));
                if !manage {
                    return view! {
                        <p class="mt-2 text-sm text-slate-700" data-testid="not-yours">
                            {format!("Creating profiles is for {}.", holders(Permission::ManageProfiles))}
                        </p>
                    }
                        .into_any();
                }
                match runners.await {
                    Ok(list) => view! { <NewProfile runners=list /> }.into_any(),
                    Err(e) => view! { <ErrorPanel error=e retry=Callback::new(move |()| runners.refetch()) /> }.into_any(),
                }
            })}
        </Suspense>
    }
    .into_any()
}

/// A name and a first candidate id; the new profile's editor opens after it is created.
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
        Some(Ok(p)) => navigate(&format!("/profiles/{}/edit", p.id), Default::default()),
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
        <section class="mt-4 rounded-lg border border-slate-300 bg-white p-4">
            <form on:submit=on_submit novalidate class="grid gap-3 sm:grid-cols-2">
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
                    hint_suffix="Provider, model and label are set in the profile's editor, which opens next."
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
                        <ServerMessageList errors=Signal::derive(move || match failure.get() {
                            Some(AppError::Invalid { errors }) => errors,
                            _ => Vec::new(),
                        }) />
                    </div>
                </div>
            </form>
        </section>
    }
    .into_any()
}
