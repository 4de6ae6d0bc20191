//! Dynamic profiles: the list (each profile can be deleted after a confirmation), and for those
//! who manage profiles a "New profile" link to the form that creates one (`/profiles/new`,
//! [`super::profile_new`], whose code loads with the profile editor's, when first opened).
//!
//! Deleting asks first, in place: the row's Delete button turns into a question with "Delete"
//! and "Keep" buttons, focus moves to "Keep" (the harmless answer), and Escape or "Keep" puts
//! focus back on Delete. The server may refuse (it keeps a profile that routes used, so their
//! history stays readable); its reason is shown on the row. After a deletion the list is read
//! again and the outcome is announced. Deleting and creating are offered only to those who
//! manage profiles; others read whose they are.

use crate::{
    api::profiles::{list_profiles, DeleteProfile},
    auth::{holders, manages_profiles, IfAllowed, SessionResource},
    components::{
        controls::FOCUS,
        profile_editor::focus_later,
        status::{Empty, ErrorPanel, Loading},
    },
    error::AppError,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use policy::{api::ProfileSummary, auth::Permission};

crate::pages::lazy_page!(ProfilesRoute, ProfilesPage);
#[component]
pub fn ProfilesPage() -> impl IntoView {
    let profiles = crate::codec::resource(|| (), |_| list_profiles());
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
                                <p>"Create one with New profile below; you then add more candidates and set their policies in its editor."</p>
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
            <p class="mt-8">
                <A
                    href="/profiles/new"
                    attr:class=format!(
                        "inline-flex min-h-11 items-center rounded-md bg-indigo-700 px-5 text-sm font-semibold text-white \
                         hover:bg-indigo-800 {FOCUS}",
                    )
                >
                    "New profile"
                </A>
            </p>
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
