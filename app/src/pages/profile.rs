//! One profile's page: its candidates and their Transient and Hard policies, editable by those
//! who manage profiles (the only right that edits policies), with what the server's
//! configuration offers their targets, and shown read-only to others.

use crate::{
    api::{profiles::get_profile, runners::list_runners},
    auth::{holders, manages_profiles, SessionResource},
    components::{
        controls::FOCUS,
        notification_rules::NotificationRulesView,
        profile_editor::ProfileEditor,
        status::{ErrorPanel, Loading},
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_params_map};
use policy::{
    auth::Permission,
    document::{ClassPolicy, OnExhausted},
};

crate::pages::lazy_page!(ProfileRoute, ProfilePage);
#[component]
pub fn ProfilePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let profile = crate::codec::resource(id, get_profile);
    let runners = crate::codec::resource(|| (), |()| list_runners());
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
                let loaded = match profile.await {
                    Ok(p) => runners.await.map(|r| (p, r)),
                    Err(e) => Err(e),
                };
                match loaded {
                    Ok((p, runners)) => {
                        let title = p.name.clone();
                        view! {
                            <Title text=title.clone() />
                            <h1 class="text-2xl font-semibold break-words">{title}</h1>
                            <p class="mt-1 mb-4 text-slate-700">
                                "Edits affect the next failure decision of this profile's routes; pending waits and \
                                 history keep the policy they were decided with."
                            </p>
                            {(p.kind == policy::api::ProfileKind::Concrete)
                                .then(|| {
                                    view! {
                                        <p class="mb-4 text-slate-700" data-testid="profile-kind">
                                            "A single-agent (concrete) profile: one candidate, used interactively. \
                                             When its recovery is used up it stops for you instead of switching."
                                        </p>
                                    }
                                })}
                            {if manage {
                                view! { <ProfileEditor profile=p runners=runners /> }.into_any()
                            } else {
                                let rules = p.notifications.clone();
                                view! {
                                    <ReadOnlyPolicy profile=p />
                                    <NotificationRulesView rules=rules />
                                }
                                    .into_any()
                            }}
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! {
                            <h1 class="text-2xl font-semibold">"Profile"</h1>
                            <ErrorPanel
                                error=e
                                retry=Callback::new(move |()| {
                                    profile.refetch();
                                    runners.refetch();
                                })
                            />
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
    .into_any()
}

/// The profile's candidates and policies as text, for someone who may not edit them.
#[component]
fn ReadOnlyPolicy(profile: policy::api::Profile) -> impl IntoView {
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
        <p class="mb-4 text-sm text-slate-700" data-testid="not-yours">
            {format!("Editing policies is for {}.", holders(Permission::ManageProfiles))}
        </p>
        <ol class="space-y-3" data-testid="read-only-policy">
            {profile
                .policy
                .candidates
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    view! {
                        <li class="rounded-lg border border-slate-300 bg-white p-4">
                            <h2 class="break-all text-base font-semibold">{format!("{}. {}", i + 1, c.id)}</h2>
                            <dl class="mt-2 grid grid-cols-1 gap-x-4 gap-y-1 text-sm sm:grid-cols-[auto_1fr]">
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
