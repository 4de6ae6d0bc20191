//! The profile editor: the profile's name, its candidates in order (add, remove, move up and
//! down by buttons or Alt+Arrow keys), and for each candidate an expandable policy area with
//! its "Transient errors" and "Hard errors" sections.
//!
//! On a desktop the policy area opens in place inside the candidate's row, the two sections
//! side by side; on a phone the same markup collapses to one column of disclosures, with the
//! page as the only scroll owner. Saving sends the whole profile and replaces the form with the
//! normalized profile the server returns, so what is on screen is what is stored.
//!
//! Below the form, "Try an error" ([`TryError`]) plays the form's current policy against a
//! pasted or picked error.
//!
//! Each candidate's policy area starts with how the candidate is reached (its target: the
//! dispatcher, for `acp` and `http` the configured agent or endpoint that runs it, provider and
//! model ids, a label), so a new candidate's `external` dispatcher is on screen and changeable
//! rather than a silent server default. Only what the server's configuration lists is offered
//! (see [`crate::configured`]).

use crate::{
    api::profiles::SaveProfile,
    components::{
        class_policy::{ClassPolicyEditor, ServerMessages},
        controls::{FieldMessage, ServerMessageList, FOCUS},
        dispatcher_choice::DispatcherChoice,
        notification_rules::{self, NotificationRulesEditor},
        try_error::TryError,
    },
    configured::{needs_runner, not_configured, runner_noun, Configured},
    draft::{self, describe_script, move_item, CandidateDraft, TargetDraft, TargetField},
    error::AppError,
};
use leptos::prelude::*;
use policy::{
    api::{DispatcherKind, Profile, ProfileInput, RunnerOption},
    class::ErrorClass,
    document::{
        policy_path, validate_candidate_id, CandidatePolicy, ValidatedCandidatePolicy, ValidationError,
    },
    input::{check_line, check_optional_line},
    limits::{MAX_CANDIDATES, MAX_LABEL_CHARS, MAX_PROFILE_NAME_CHARS, MIN_CANDIDATES},
    schedule::describe_policy,
};

/// A candidate row: its policy draft and how it is reached.
#[derive(Debug, Clone, Copy)]
struct Row {
    draft: CandidateDraft,
    target: TargetDraft,
}

impl Row {
    /// Whether every field of the row (policy and target) is valid, its runner included
    /// (tracked).
    fn is_valid(&self, configured: &Configured) -> bool {
        self.draft.candidate().is_some()
            && self.target.target("").is_some()
            && self.target.problem(configured).is_none()
    }
}

/// The rows of a stored profile, keyed from `first_key`.
fn rows_of(profile: &Profile, first_key: u64) -> Vec<Row> {
    profile
        .policy
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let target = profile
                .targets
                .iter()
                .find(|t| t.id == c.id)
                .map_or_else(|| TargetDraft::external(&c.id), TargetDraft::new);
            Row {
                draft: CandidateDraft::new(first_key + i as u64, c),
                target,
            }
        })
        .collect()
}

/// Moves keyboard focus to the element with `id` once the DOM has caught up.
pub(crate) fn focus_later(id: String) {
    #[cfg(feature = "hydrate")]
    request_animation_frame(move || {
        use wasm_bindgen::JsCast;
        if let Some(el) = document()
            .get_element_by_id(&id)
            .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
        {
            let _ = el.focus();
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = id;
}

/// The editor of `profile`; `runners` are the agents and endpoints the server's configuration
/// lists (what `acp` and `http` candidates may name).
#[component]
pub fn ProfileEditor(profile: Profile, runners: Vec<RunnerOption>) -> impl IntoView {
    let configured = StoredValue::new(Configured::new(runners));
    let profile_id = StoredValue::new(profile.id.clone());
    let revision = RwSignal::new(profile.revision);
    let name = RwSignal::new(profile.name.clone());
    let description = StoredValue::new(profile.description.clone());
    // What the profile is for is not edited here: a save keeps it.
    let kind = profile.kind;
    let next_key = StoredValue::new(profile.policy.candidates.len() as u64);
    let rows = RwSignal::new(rows_of(&profile, 0));
    let rules = RwSignal::new(notification_rules::drafts(&profile.notifications));
    let server_errors: RwSignal<Vec<ValidationError>> = RwSignal::new(Vec::new());
    let saved: RwSignal<Option<Profile>> = RwSignal::new(None);
    let notice: RwSignal<Option<String>> = RwSignal::new(None);
    let save = ServerAction::<SaveProfile>::new();

    // The server's message for a path (tracked), and forgetting it once the field is edited.
    let server_message = Callback::new(move |path: String| {
        server_errors.with(|errs| errs.iter().find(|e| e.path == path).map(|e| e.message.clone()))
    });
    let clear_message = Callback::new(move |path: String| {
        if server_errors.with_untracked(|errs| errs.iter().any(|e| e.path == path)) {
            server_errors.update(|errs| errs.retain(|e| e.path != path));
        }
    });
    let messages = ServerMessages {
        get: server_message,
        clear: clear_message,
    };

    // The answer to a save: the normalized profile replaces the form; errors land on fields.
    Effect::new(move |_| {
        let Some(result) = save.value().get() else { return };
        match result {
            Ok(stored) => {
                let open: Vec<bool> =
                    rows.with_untracked(|r| r.iter().map(|r| r.draft.open.get_untracked()).collect());
                let first = next_key.get_value();
                let fresh = rows_of(&stored, first);
                next_key.set_value(first + fresh.len() as u64);
                for (row, was_open) in fresh.iter().zip(open) {
                    row.draft.open.set(was_open);
                }
                rows.set(fresh);
                rules.set(notification_rules::drafts(&stored.notifications));
                name.set(stored.name.clone());
                revision.set(stored.revision);
                server_errors.set(Vec::new());
                notice.set(None);
                saved.set(Some(stored));
            }
            Err(AppError::Invalid { errors }) => {
                saved.set(None);
                notice.set(Some(
                    AppError::Invalid {
                        errors: errors.clone(),
                    }
                    .to_string(),
                ));
                server_errors.set(errors);
            }
            Err(other) => {
                saved.set(None);
                notice.set(Some(other.to_string()));
            }
        }
    });

    let on_save = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let current = rows.get_untracked();
        let drafts: Vec<CandidateDraft> = current.iter().map(|r| r.draft).collect();
        let doc = draft::document(&drafts);
        let name_ok = !name.get_untracked().trim().is_empty();
        let targets: Option<Vec<_>> = current
            .iter()
            .map(|r| r.target.target(&r.draft.id.get_untracked()))
            .collect();
        let runners_ok = configured.with_value(|c| current.iter().all(|r| r.target.problem(c).is_none()));
        let notifications = notification_rules::collect(&rules.get_untracked());
        let Some(((doc, targets), notifications)) = doc
            .zip(targets)
            .zip(notifications)
            .filter(|_| name_ok && runners_ok)
        else {
            saved.set(None);
            notice.set(Some(
                "Some values need fixing first; they are marked in red.".to_owned(),
            ));
            // Open every row with a problem so the marked fields are visible.
            for r in &current {
                if !configured.with_value(|c| r.is_valid(c)) {
                    r.draft.open.set(true);
                }
            }
            return;
        };
        let policy = match serde_json::to_value(&doc) {
            Ok(v) => v,
            Err(_) => return,
        };
        notice.set(None);
        save.dispatch(SaveProfile {
            id: profile_id.get_value(),
            input: ProfileInput {
                name: name.get_untracked(),
                kind,
                description: description.get_value(),
                targets,
                policy,
                expected_revision: Some(revision.get_untracked()),
                notifications,
            },
        });
    };

    let move_row = move |key: u64, delta: isize, focus: &'static str| {
        rows.update(|rs| {
            if let Some(from) = rs.iter().position(|r| r.draft.key == key) {
                let to = from.saturating_add_signed(delta);
                move_item(rs, from, to);
            }
        });
        server_errors.set(Vec::new());
        focus_later(format!("cand-{key}-{focus}"));
    };

    // Adding a candidate.
    let new_id = RwSignal::new(String::new());
    let new_id_touched = RwSignal::new(false);
    let new_id_error = Signal::derive(move || {
        if !new_id_touched.get() {
            return None;
        }
        new_id.with(|id| validate_candidate_id(id).err().map(|e| e.message))
    });
    let full = move || rows.with(|r| r.len() >= MAX_CANDIDATES);
    let add = move || {
        new_id_touched.set(true);
        let id = new_id.get_untracked();
        if validate_candidate_id(&id).is_err() || full() {
            focus_later("new-candidate-id".to_owned());
            return;
        }
        let key = next_key.get_value();
        next_key.set_value(key + 1);
        let draft = CandidateDraft::new(key, &CandidatePolicy::with_defaults(id.trim()));
        draft.open.set(true);
        rows.update(|r| {
            r.push(Row {
                draft,
                target: TargetDraft::external(id.trim()),
            })
        });
        new_id.set(String::new());
        new_id_touched.set(false);
        focus_later(format!("cand-{key}-id"));
    };

    let name_error = Signal::derive(move || {
        match name.with(|n| check_line(n.trim(), "the profile a name", MAX_PROFILE_NAME_CHARS)) {
            Err(e) => Some(e.message),
            Ok(()) => server_message.run("name".to_owned()),
        }
    });
    let doc_error = Signal::derive(move || server_message.run("candidates".to_owned()));

    view! {
        <form on:submit=on_save novalidate class="space-y-6">
            <div>
                <label for="profile-name" class="block text-sm font-medium text-slate-900">
                    "Profile name"
                </label>
                <input
                    id="profile-name"
                    type="text"
                    autocomplete="off"
                    class=format!(
                        "mt-1 h-11 w-full max-w-md rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}",
                    )
                    aria-describedby="profile-name-error"
                    aria-invalid=move || name_error.with(Option::is_some).to_string()
                    value=move || name.get()
                    prop:value=move || name.get()
                    on:input=move |ev| {
                        name.set(event_target_value(&ev));
                        clear_message.run("name".to_owned());
                    }
                />
                <FieldMessage id="profile-name-error" message=name_error />
            </div>

            <section aria-labelledby="candidates-heading">
                <h2 id="candidates-heading" class="text-lg font-semibold text-slate-900">
                    "Candidates, in order"
                </h2>
                <p class="mt-1 text-sm text-slate-600">
                    "Work starts on the first eligible candidate; a skip moves to the next. Reorder with the \
                     buttons, or with Alt+Arrow Up and Alt+Arrow Down on a row."
                </p>
                <FieldMessage id="candidates-error" message=doc_error />
                <ol class="mt-3 space-y-3">
                    <For each=move || rows.get() key=|r| r.draft.key let:row>
                        <CandidateRow
                            row=row
                            rows=rows
                            configured=configured
                            messages=messages
                            move_row=Callback::new(move |(delta, focus): (isize, &'static str)| {
                                move_row(row.draft.key, delta, focus)
                            })
                            remove=Callback::new(move |()| {
                                rows.update(|rs| rs.retain(|r| r.draft.key != row.draft.key));
                                server_errors.set(Vec::new());
                                focus_later("new-candidate-id".to_owned());
                            })
                        />
                    </For>
                </ol>

                <div class="mt-4 rounded-lg border border-dashed border-slate-400 bg-white p-4">
                    <label for="new-candidate-id" class="block text-sm font-medium text-slate-900">
                        "Add a candidate (its id)"
                    </label>
                    <div class="mt-1 flex flex-col gap-2 sm:flex-row">
                        <input
                            id="new-candidate-id"
                            type="text"
                            autocomplete="off"
                            placeholder="e.g. claude-backup"
                            class=format!(
                                "h-11 w-full rounded-md border border-slate-400 bg-white px-3 text-base sm:max-w-xs {FOCUS}",
                            )
                            aria-describedby="new-candidate-id-error"
                            aria-invalid=move || new_id_error.with(Option::is_some).to_string()
                            value=move || new_id.get()
                            prop:value=move || new_id.get()
                            on:input=move |ev| {
                                new_id.set(event_target_value(&ev));
                                new_id_touched.set(true);
                            }
                            on:keydown=move |ev| {
                                if ev.key() == "Enter" {
                                    ev.prevent_default();
                                    add();
                                }
                            }
                        />
                        <button
                            type="button"
                            class=format!(
                                "min-h-11 rounded-md border border-indigo-700 bg-white px-4 text-sm font-semibold text-indigo-800 \
                                 hover:bg-indigo-50 disabled:border-slate-300 disabled:text-slate-500 {FOCUS}",
                            )
                            disabled=full
                            on:click=move |_| add()
                        >
                            "Add candidate"
                        </button>
                    </div>
                    <FieldMessage id="new-candidate-id-error" message=new_id_error />
                    <p class="mt-1 text-xs text-slate-600" hidden=move || !full()>
                        {format!("A profile can have at most {MAX_CANDIDATES} candidates.")}
                    </p>
                </div>
            </section>

            <NotificationRulesEditor rules=rules messages=messages />

            <div class="sticky bottom-0 -mx-4 border-t border-slate-200 bg-slate-50/95 px-4 py-3 sm:static sm:mx-0 sm:border-0 sm:bg-transparent sm:px-0">
                <div class="flex flex-wrap items-center gap-3">
                    <button
                        type="submit"
                        class=format!(
                            "min-h-11 rounded-md bg-indigo-700 px-5 text-sm font-semibold text-white hover:bg-indigo-800 \
                             disabled:bg-slate-500 {FOCUS}",
                        )
                        disabled=move || save.pending().get()
                    >
                        {move || if save.pending().get() { "Saving…" } else { "Save profile" }}
                    </button>
                    <span class="text-sm text-slate-600">{move || format!("Revision {}", revision.get())}</span>
                </div>
                <div role="alert" class="mt-2 text-sm font-medium text-red-700">
                    <p>{move || notice.get()}</p>
                    <ServerMessageList errors=server_errors />
                </div>
            </div>
        </form>

        <SavedDocument saved=saved />

        <TryError candidates=Signal::derive(move || {
            rows.with(|rs| {
                rs.iter()
                    .map(|r| r.draft.candidate().and_then(|c| ValidatedCandidatePolicy::try_from(c).ok()))
                    .collect::<Option<Vec<_>>>()
            })
        }) />
    }
    .into_any()
}

/// After a save: what the server stored, in words and as the normalized JSON document.
#[component]
fn SavedDocument(saved: RwSignal<Option<Profile>>) -> impl IntoView {
    let json_open = RwSignal::new(false);
    view! {
        <Show when=move || saved.with(Option::is_some)>
            <section
                aria-labelledby="saved-heading"
                class="mt-6 rounded-lg border border-emerald-300 bg-emerald-50 p-4"
                data-testid="saved-document"
            >
                <h2 id="saved-heading" role="status" class="text-base font-semibold text-emerald-900">
                    {move || {
                        saved
                            .with(|p| p.as_ref().map(|p| format!("Saved revision {}.", p.revision)))
                            .unwrap_or_default()
                    }}
                </h2>
                <p class="mt-1 text-sm text-emerald-900">
                    "The server stored this normalized document; the form now shows it."
                </p>
                <ul class="mt-2 space-y-2 text-sm text-slate-800">
                    {move || {
                        saved
                            .with(|p| p.as_ref().map(|p| p.policy.candidates.clone()))
                            .unwrap_or_default()
                            .into_iter()
                            .map(|c| {
                                let lines: Vec<String> = ErrorClass::ALL
                                    .into_iter()
                                    .map(|class| {
                                        let policy = match class {
                                            ErrorClass::Transient => c.transient,
                                            ErrorClass::Hard => c.hard,
                                        };
                                        let text = policy::document::ValidatedClassPolicy::new(policy)
                                            .map(|v| describe_policy(&v))
                                            .unwrap_or_default();
                                        format!("{}: {text}", class.label())
                                    })
                                    .collect();
                                view! {
                                    <li>
                                        <span class="font-semibold">{c.id.clone()}</span>
                                        <ul class="pl-4">
                                            {lines.into_iter().map(|l| view! { <li>{l}</li> }).collect_view()}
                                        </ul>
                                    </li>
                                }
                            })
                            .collect_view()
                    }}
                </ul>
                <button
                    type="button"
                    class=format!(
                        "mt-3 min-h-11 rounded-md border border-emerald-700 bg-white px-3 text-sm font-medium text-emerald-900 {FOCUS}",
                    )
                    aria-expanded=move || json_open.get().to_string()
                    aria-controls="saved-json"
                    on:click=move |_| json_open.update(|o| *o = !*o)
                >
                    {move || if json_open.get() { "Hide the stored JSON" } else { "Show the stored JSON" }}
                </button>
                <pre
                    id="saved-json"
                    hidden=move || !json_open.get()
                    class="mt-2 max-h-96 overflow-auto whitespace-pre-wrap break-all rounded bg-white p-3 text-xs text-slate-800"
                >
                    {move || {
                        saved
                            .with(|p| p.as_ref().map(|p| serde_json::to_string_pretty(&p.policy).unwrap_or_default()))
                            .unwrap_or_default()
                    }}
                </pre>
            </section>
        </Show>
    }
    .into_any()
}

/// One candidate: its id, position controls and the expandable policy area.
#[component]
fn CandidateRow(
    row: Row,
    rows: RwSignal<Vec<Row>>,
    configured: StoredValue<Configured>,
    messages: ServerMessages,
    move_row: Callback<(isize, &'static str)>,
    remove: Callback<()>,
) -> impl IntoView {
    let key = row.draft.key;
    let d = row.draft;
    let index = Memo::new(move |_| rows.with(|rs| rs.iter().position(|r| r.draft.key == key).unwrap_or(0)));
    let count = Memo::new(move |_| rows.with(Vec::len));
    let id_path = move || format!("candidates[{}].id", index.get());
    let id_error = Signal::derive(move || match d.check_id() {
        Err(e) => Some(e.message),
        Ok(()) => messages.get.run(id_path()),
    });
    let row_error = Signal::derive(move || messages.get.run(format!("candidates[{}]", index.get())));
    let area_id = format!("cand-{key}-policy");
    let summary = move |class: ErrorClass| {
        move || match d.class(class).validated() {
            Some(p) => format!("{}: {}", class.label(), describe_policy(&p)),
            None => format!("{}: some values need fixing.", class.label()),
        }
    };
    let button = format!(
        "min-h-11 rounded-md border border-slate-400 bg-white px-3 text-sm font-medium text-slate-800 \
         hover:bg-slate-100 disabled:border-slate-200 disabled:text-slate-500 {FOCUS}"
    );
    let on_keydown = move |ev: leptos::ev::KeyboardEvent| {
        if !ev.alt_key() {
            return;
        }
        match ev.key().as_str() {
            "ArrowUp" if index.get_untracked() > 0 => {
                ev.prevent_default();
                move_row.run((-1, "id"));
            }
            "ArrowDown" if index.get_untracked() + 1 < count.get_untracked() => {
                ev.prevent_default();
                move_row.run((1, "id"));
            }
            _ => {}
        }
    };
    let prefix = format!("cand-{key}");
    let path_transient =
        Callback::new(move |field: &'static str| policy_path(index.get(), ErrorClass::Transient, field));
    let path_hard =
        Callback::new(move |field: &'static str| policy_path(index.get(), ErrorClass::Hard, field));

    view! {
        <li class="min-w-0 rounded-lg border border-slate-300 bg-white" on:keydown=on_keydown data-candidate-key=key>
            <div class="flex flex-col gap-3 p-3 lg:flex-row lg:items-start">
                <div class="min-w-0 flex-1">
                    <label for=format!("cand-{key}-id") class="block text-sm font-medium text-slate-900">
                        {move || format!("Candidate {} id", index.get() + 1)}
                    </label>
                    <input
                        id=format!("cand-{key}-id")
                        type="text"
                        autocomplete="off"
                        class=move || {
                            let border = if id_error.with(Option::is_some) { "border-red-700" } else { "border-slate-400" };
                            format!("mt-1 h-11 w-full rounded-md border {border} bg-white px-3 text-base {FOCUS}")
                        }
                        aria-describedby=format!("cand-{key}-id-error")
                        aria-invalid=move || id_error.with(Option::is_some).to_string()
                        value=move || d.id.get()
                        prop:value=move || d.id.get()
                        on:input=move |ev| {
                            d.id.set(event_target_value(&ev));
                            messages.clear.run(id_path());
                        }
                    />
                    <FieldMessage id=format!("cand-{key}-id-error") message=id_error />
                    <FieldMessage id=format!("cand-{key}-error") message=row_error />
                    <p class="mt-1 break-words text-xs text-slate-600" data-testid="target-summary">
                        {move || configured.with_value(|c| target_summary(&row.target, c))}
                    </p>
                </div>
                <div class="flex flex-wrap gap-2 lg:pt-6">
                    <button
                        type="button"
                        id=format!("cand-{key}-up")
                        class=button.clone()
                        disabled=move || index.get() == 0
                        on:click=move |_| move_row.run((-1, "up"))
                    >
                        "Move up"
                        <span class="sr-only">{move || format!(" {}", d.id.get())}</span>
                    </button>
                    <button
                        type="button"
                        id=format!("cand-{key}-down")
                        class=button.clone()
                        disabled=move || { index.get() + 1 >= count.get() }
                        on:click=move |_| move_row.run((1, "down"))
                    >
                        "Move down"
                        <span class="sr-only">{move || format!(" {}", d.id.get())}</span>
                    </button>
                    <button
                        type="button"
                        class=button.clone()
                        disabled=move || { count.get() <= MIN_CANDIDATES }
                        title="A profile needs at least one candidate"
                        on:click=move |_| remove.run(())
                    >
                        "Remove"
                        <span class="sr-only">{move || format!(" {}", d.id.get())}</span>
                    </button>
                    <button
                        type="button"
                        id=format!("cand-{key}-toggle")
                        class=format!(
                            "min-h-11 rounded-md border border-indigo-700 bg-indigo-50 px-3 text-sm font-semibold text-indigo-900 \
                             hover:bg-indigo-100 {FOCUS}",
                        )
                        aria-expanded=move || d.open.get().to_string()
                        aria-controls=area_id.clone()
                        on:click=move |_| d.open.update(|o| *o = !*o)
                    >
                        {move || if d.open.get() { "Hide policies" } else { "Edit policies" }}
                        <span class="sr-only">{move || format!(" for {}", d.id.get())}</span>
                    </button>
                </div>
            </div>
            <div class="border-t border-slate-200 px-3 py-2 text-sm text-slate-700" hidden=move || d.open.get()>
                <p>{summary(ErrorClass::Transient)}</p>
                <p>{summary(ErrorClass::Hard)}</p>
            </div>
            <div
                id=area_id
                class="grid gap-4 border-t border-slate-200 p-3 lg:grid-cols-2"
                hidden=move || !d.open.get()
            >
                <TargetEditor
                    target=row.target
                    configured=configured
                    prefix=prefix.clone()
                    index=index
                    messages=messages
                />
                <ClassPolicyEditor draft=d.transient prefix=prefix.clone() path=path_transient messages=messages />
                <ClassPolicyEditor draft=d.hard prefix=prefix.clone() path=path_hard messages=messages />
            </div>
        </li>
    }
    .into_any()
}

/// A collapsed row's line about its target: "Dispatcher: http · endpoint mini · provider
/// openai · model m", with "(not configured on this server)" after a kind or runner the
/// configuration does not list.
fn target_summary(target: &TargetDraft, configured: &Configured) -> String {
    let kind = target.dispatcher.get();
    let kind_text = if configured.runs(kind) {
        kind.as_str().to_owned()
    } else {
        not_configured(kind.as_str())
    };
    let mut parts = vec![format!("Dispatcher: {kind_text}")];
    let runner = target.runner.with(|r| r.trim().to_owned());
    if needs_runner(kind) && !runner.is_empty() {
        let text = if configured.find(kind, &runner).is_some() {
            runner
        } else {
            not_configured(&runner)
        };
        parts.push(format!("{} {text}", runner_noun(kind)));
    }
    for (what, field) in [
        ("provider", TargetField::ProviderId),
        ("model", TargetField::ModelId),
    ] {
        if let Ok(Some(id)) = target.check(field) {
            parts.push(format!("{what} {id}"));
        }
    }
    parts.join(" · ")
}

/// How a candidate is reached: its dispatcher, the provider and model ids (checked as the
/// server checks them, messages on the field), a label, and a simulated candidate's script.
#[component]
fn TargetEditor(
    target: TargetDraft,
    configured: StoredValue<Configured>,
    prefix: String,
    index: Memo<usize>,
    messages: ServerMessages,
) -> impl IntoView {
    let target_error_id = format!("{prefix}-target-error");
    let runner_path = move || format!("targets[{}].runner", index.get());
    let server_runner = Signal::derive(move || messages.get.run(runner_path()));
    let path = move |field: TargetField| format!("targets[{}].{}", index.get(), field.key());
    let error = move |field: TargetField| {
        Signal::derive(move || match target.check(field) {
            Err(e) => Some(e.message),
            Ok(_) => messages.get.run(path(field)),
        })
    };
    let label_path = move || format!("targets[{}].label", index.get());
    let label_error = Signal::derive(move || {
        match target
            .label
            .with(|l| check_optional_line(l.trim(), "the label", MAX_LABEL_CHARS))
        {
            Err(e) => Some(e.message),
            Ok(()) => messages.get.run(label_path()),
        }
    });
    let target_error = Signal::derive(move || {
        let i = index.get();
        messages
            .get
            .run(format!("targets[{i}]"))
            .or_else(|| messages.get.run(format!("targets[{i}].id")))
    });
    let script = move || {
        let steps = target.script.with_value(|s| describe_script(s));
        let text = if steps.is_empty() {
            "No script: a simulated candidate without one succeeds at once. Scripts are set through the API."
                .to_owned()
        } else {
            format!("Script (set through the API, kept as it is): {steps}.")
        };
        (target.dispatcher.get() == DispatcherKind::Simulated)
            .then(|| view! { <p class="text-xs text-slate-700 sm:col-span-2" data-testid="target-script">{text}</p> })
    };
    view! {
        <fieldset class="min-w-0 rounded-md border border-slate-300 p-3 lg:col-span-2" data-testid="candidate-target">
            <legend class="px-1 text-sm font-semibold text-slate-900">"How this candidate is reached"</legend>
            <div class="grid gap-3 sm:grid-cols-2">
                <DispatcherChoice
                    target=target
                    configured=configured
                    prefix=prefix.clone()
                    labels=("Dispatcher", "")
                    server_runner=server_runner
                    on_edit=Callback::new(move |()| messages.clear.run(runner_path()))
                >
                    <FieldMessage id=target_error_id message=target_error />
                </DispatcherChoice>
                <OptionalText
                    id=format!("{prefix}-provider")
                    label="Provider id (optional)"
                    hint="A safe identifier such as anthropic; failures open circuits per provider."
                    text=target.provider_id
                    error=error(TargetField::ProviderId)
                    on_edit=Callback::new(move |()| messages.clear.run(path(TargetField::ProviderId)))
                />
                <OptionalText
                    id=format!("{prefix}-model")
                    label="Model id (optional)"
                    hint="A safe identifier such as claude-sonnet-4-5."
                    text=target.model_id
                    error=error(TargetField::ModelId)
                    on_edit=Callback::new(move |()| messages.clear.run(path(TargetField::ModelId)))
                />
                <div class="sm:col-span-2">
                    <OptionalText
                        id=format!("{prefix}-label")
                        label="Label (optional)"
                        hint="A readable name for this candidate."
                        text=target.label
                        error=label_error
                        on_edit=Callback::new(move |()| messages.clear.run(label_path()))
                    />
                </div>
                {script}
            </div>
        </fieldset>
    }
    .into_any()
}

/// A labelled, optional one-line text field with a hint and an inline message.
#[component]
fn OptionalText(
    id: String,
    label: &'static str,
    hint: &'static str,
    text: RwSignal<String>,
    error: Signal<Option<String>>,
    on_edit: Callback<()>,
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    let error_id = format!("{id}-error");
    view! {
        <div class="min-w-0">
            <label for=id.clone() class="block text-sm font-medium text-slate-900">{label}</label>
            <p id=hint_id.clone() class="text-xs text-slate-600">{hint}</p>
            <input
                id=id
                type="text"
                autocomplete="off"
                class=move || {
                    let border = if error.with(Option::is_some) { "border-red-700" } else { "border-slate-400" };
                    format!("mt-1 h-11 w-full rounded-md border {border} bg-white px-3 text-base text-slate-900 {FOCUS}")
                }
                aria-describedby=format!("{hint_id} {error_id}")
                aria-invalid=move || error.with(Option::is_some).to_string()
                value=move || text.get()
                prop:value=move || text.get()
                on:input=move |ev| {
                    text.set(event_target_value(&ev));
                    on_edit.run(());
                }
            />
            <FieldMessage id=error_id message=error />
        </div>
    }
    .into_any()
}
