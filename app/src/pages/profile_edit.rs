//! A profile's editor, a page of its own (`/profiles/:id/edit`): its candidates and their
//! Transient and Hard policies, how each is reached (what the server's configuration offers),
//! who is told what, and "Try an error". For those who manage profiles; others read that
//! editing is theirs and find the profile's page one link away.
//!
//! The editor is most of the profiles' code, and most visits to a profile only read it: as a
//! page of its own, its code loads when a person opens it, not with every profile's page.
//! The same lazy route shows the new-profile form (`/profiles/new`, [`super::profile_new`]):
//! the two share most of their code, and one piece for both adds no split point (every split
//! point cuts the code pages share into more, smaller pieces, each a request of every page).

use crate::{
    api::{profiles::get_profile, runners::list_runners},
    auth::{manages_profiles, SessionResource},
    components::{
        controls::FOCUS,
        profile_editor::ProfileEditor,
        status::{ErrorPanel, Loading},
    },
    pages::{
        profile::{NotYoursToEdit, ProfileKindNote},
        profile_new::NewProfilePage,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_params_map};

crate::pages::lazy_page!(ProfileEditRoute, ProfileEditing);
/// `/profiles/new` (no `id`) or `/profiles/:id/edit`.
#[component]
pub fn ProfileEditing() -> impl IntoView {
    let params = use_params_map();
    if params.read_untracked().get("id").is_none() {
        view! { <NewProfilePage /> }.into_any()
    } else {
        view! { <ProfileEditPage /> }.into_any()
    }
}

/// The editor of the profile named by the address.
#[component]
fn ProfileEditPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let profile = crate::codec::resource(id, get_profile);
    let runners = crate::codec::resource(|| (), |()| list_runners());
    let session = expect_context::<SessionResource>();
    let back = move || format!("/profiles/{}", id());
    view! {
        <Title text="Edit profile" />
        <p>
            <A href=back attr:class=format!("inline-flex min-h-11 items-center text-sm text-indigo-800 underline {FOCUS}")>
                "← The profile"
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
                            <Title text=format!("Edit {title}") />
                            <h1 class="text-2xl font-semibold break-words">{title}</h1>
                            {if manage {
                                view! {
                                    <p class="mt-1 mb-4 text-slate-700">
                                        "Edits affect the next failure decision of this profile's routes; pending waits and \
                                         history keep the policy they were decided with."
                                    </p>
                                    <ProfileKindNote kind=p.kind />
                                    <ProfileEditor profile=p runners=runners />
                                }
                                    .into_any()
                            } else {
                                view! { <NotYoursToEdit /> }.into_any()
                            }}
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! {
                            <h1 class="text-2xl font-semibold">"Edit profile"</h1>
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
