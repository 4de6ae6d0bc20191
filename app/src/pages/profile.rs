//! One profile's page: its candidates and their Transient and Hard policies, editable, with
//! what the server's configuration offers their targets.

use crate::{
    api::{profiles::get_profile, runners::list_runners},
    components::{
        controls::FOCUS,
        profile_editor::ProfileEditor,
        status::{ErrorPanel, Loading},
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::A, hooks::use_params_map};

#[component]
pub fn ProfilePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let profile = Resource::new(id, get_profile);
    let runners = Resource::new(|| (), |()| list_runners());
    view! {
        <Title text="Profile" />
        <p>
            <A href="/profiles" attr:class=format!("inline-flex min-h-11 items-center text-sm text-indigo-800 underline {FOCUS}")>
                "← All profiles"
            </A>
        </p>
        <Suspense fallback=|| view! { <Loading what="the profile" /> }>
            {move || Suspend::new(async move {
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
                            <ProfileEditor profile=p runners=runners />
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
