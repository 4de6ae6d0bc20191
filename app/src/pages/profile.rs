//! One profile's page: its candidates, how each is reached, their Transient and Hard policies
//! and who is told what, as text for everyone who may read profiles. Those who manage profiles
//! (the only right that edits policies) get an "Edit profile" link to the editor's own page
//! (`profile_edit`), whose code loads only when it is opened: most visits to a profile read it,
//! and the editor is most of the profile's code.

use crate::{
    api::profiles::get_profile,
    auth::{holders, manages_profiles, SessionResource},
    components::{
        controls::FOCUS,
        notification_rules::NotificationRulesView,
        status::{ErrorPanel, Loading},
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_params_map};
use policy::{
    api::{CandidateTarget, DispatcherKind, Profile, ProfileKind},
    auth::Permission,
    document::{ClassPolicy, OnExhausted},
};

crate::pages::lazy_page!(ProfileRoute, ProfilePage);
#[component]
pub fn ProfilePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let profile = crate::codec::resource(id, get_profile);
    let session = expect_context::<SessionResource>();
    view! {
        <Title text="Profile" />
        <p>
            <A href="/profiles" attr:class=format!("inline-flex min-h-11 items-center text-sm text-indigo-800 underline {FOCUS}")>
                "← All profiles"
            </A>
        </p>
        <Suspense fallback=|| view! { <Loading what="the profile" /> }>
            {move || Suspend::new(async move {
                let manage = matches!(session.await, Ok(v) if v.viewer.as_ref().is_some_and(|w| manages_profiles(w.permissions)));
                match profile.await {
                    Ok(p) => {
                        let title = p.name.clone();
                        let edit = format!("/profiles/{}/edit", p.id);
                        let rules = p.notifications.clone();
                        view! {
                            <Title text=title.clone() />
                            <h1 class="text-2xl font-semibold break-words">{title}</h1>
                            <ProfileKindNote kind=p.kind />
                            {if manage {
                                view! {
                                    <p class="mt-3 mb-4">
                                        <A
                                            href=edit
                                            attr:data-testid="edit-profile"
                                            attr:class=format!(
                                                "inline-flex min-h-11 items-center rounded-md bg-indigo-700 px-5 text-sm \
                                                 font-semibold text-white hover:bg-indigo-800 {FOCUS}",
                                            )
                                        >
                                            "Edit profile"
                                        </A>
                                    </p>
                                }
                                    .into_any()
                            } else {
                                view! { <NotYoursToEdit /> }.into_any()
                            }}
                            <ReadOnlyPolicy profile=p />
                            <NotificationRulesView rules=rules />
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! {
                            <h1 class="text-2xl font-semibold">"Profile"</h1>
                            <ErrorPanel error=e retry=Callback::new(move |()| profile.refetch()) />
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
    .into_any()
}

/// Whose editing policies is, for someone who may not.
#[component]
pub(crate) fn NotYoursToEdit() -> impl IntoView {
    view! {
        <p class="mb-4 text-sm text-slate-700" data-testid="not-yours">
            {format!("Editing policies is for {}.", holders(Permission::ManageProfiles))}
        </p>
    }
}

/// What a concrete profile is for (nothing for a dynamic one).
#[component]
pub(crate) fn ProfileKindNote(kind: ProfileKind) -> impl IntoView {
    (kind == ProfileKind::Concrete).then(|| {
        view! {
            <p class="mb-4 text-slate-700" data-testid="profile-kind">
                "A single-agent (concrete) profile: one candidate, used interactively. \
                 When its recovery is used up it stops for you instead of switching."
            </p>
        }
    })
}

/// How a candidate is reached, in words.
fn reached(target: Option<&CandidateTarget>) -> String {
    let Some(t) = target else {
        return "another system runs it (external)".to_owned();
    };
    let mut s = match t.dispatcher {
        DispatcherKind::Simulated => "the built-in scripted provider (simulated)".to_owned(),
        DispatcherKind::Acp => format!("the agent {} (acp)", t.runner.as_deref().unwrap_or("?")),
        DispatcherKind::Http => format!("the endpoint {} (http)", t.runner.as_deref().unwrap_or("?")),
        DispatcherKind::External => "another system runs it (external)".to_owned(),
    };
    for (what, value) in [
        ("provider", &t.provider_id),
        ("model", &t.model_id),
        ("label", &t.label),
    ] {
        if let Some(v) = value {
            s.push_str(&format!("; {what} {v}"));
        }
    }
    s
}

/// The profile's candidates and policies as text.
#[component]
fn ReadOnlyPolicy(profile: Profile) -> impl IntoView {
    let class = |c: &ClassPolicy| {
        let retry = if c.retry.enabled {
            format!(
                "retry up to {} times, first after {} s",
                c.retry.max_retries, c.retry.initial_interval_seconds
            )
        } else {
            "no retry".to_owned()
        };
        let wait = if c.wait_for_reset.enabled {
            format!("wait for a reset up to {} s", c.wait_for_reset.max_wait_seconds)
        } else {
            "no waiting for a reset".to_owned()
        };
        let then = match c.on_exhausted {
            OnExhausted::Skip => "then the next candidate",
            OnExhausted::Stop => "then stop for a person",
        };
        format!("{retry}; {wait}; {then}")
    };
    view! {
        <h2 class="mb-2 text-lg font-semibold">"Candidates"</h2>
        <ol class="space-y-3" data-testid="read-only-policy">
            {profile
                .policy
                .candidates
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let target = profile.targets.iter().find(|t| t.id == c.id);
                    view! {
                        <li class="rounded-lg border border-slate-300 bg-white p-4">
                            <h3 class="break-all text-base font-semibold">{format!("{}. {}", i + 1, c.id)}</h3>
                            <dl class="mt-2 grid grid-cols-1 gap-x-4 gap-y-1 text-sm sm:grid-cols-[auto_1fr]">
                                <dt class="font-medium">"Reached through"</dt>
                                <dd class="break-words">{reached(target)}</dd>
                                <dt class="font-medium">"Transient errors"</dt>
                                <dd>{class(&c.transient)}</dd>
                                <dt class="font-medium">"Hard errors"</dt>
                                <dd>{class(&c.hard)}</dd>
                            </dl>
                        </li>
                    }
                })
                .collect_view()}
        </ol>
    }
}
