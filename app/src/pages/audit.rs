//! The audit log, for administrators: who did what, when, from where, and what changed (a
//! policy edit shows its changed paths with the values before and after). Newest first, one
//! page at a time; "Older entries" reads the next page.

use crate::{
    auth::list_audit,
    components::{
        controls::FOCUS,
        status::{Empty, ErrorPanel, Loading},
        time::format_utc,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use policy::{auth::AuditEntry, limits::DEFAULT_AUDIT_PAGE};

crate::pages::lazy_page!(AuditRoute, AuditPage);
#[component]
pub fn AuditPage() -> impl IntoView {
    // The pages read so far, each keyed by the `seq` it starts before.
    let before: RwSignal<Option<i64>> = RwSignal::new(None);
    let page = crate::codec::resource(move || before.get(), list_audit);
    view! {
        <Title text="Audit log" />
        <h1 class="text-2xl font-semibold">"Audit log"</h1>
        <p class="mt-1 text-slate-700">
            "Every sign-in, policy edit, manual action, route start, token, account and role change: who, \
             when, from where and what changed. Entries are never changed or removed."
        </p>
        <Transition fallback=|| view! { <Loading what="the audit log" /> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(rows) if rows.is_empty() => {
                        view! {
                            <Empty id="empty-audit" title="No entries">
                                <p>"Nothing has been recorded here yet."</p>
                            </Empty>
                        }
                            .into_any()
                    }
                    Ok(rows) => {
                        let last = rows.last().map(|r| r.seq);
                        let full = rows.len() >= DEFAULT_AUDIT_PAGE as usize;
                        view! {
                            <ol class="mt-6 space-y-2" data-testid="audit-list">
                                {rows.into_iter().map(|entry| view! { <AuditRow entry=entry /> }).collect_view()}
                            </ol>
                            {(full && last.is_some())
                                .then(|| {
                                    view! {
                                        <button
                                            type="button"
                                            class=format!("mt-4 min-h-11 rounded-md border border-slate-400 px-4 text-sm font-medium {FOCUS}")
                                            on:click=move |_| before.set(last)
                                        >
                                            "Older entries"
                                        </button>
                                    }
                                })}
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorPanel error=e retry=Callback::new(move |()| page.refetch()) /> }.into_any(),
                }
            })}
        </Transition>
    }
    .into_any()
}

#[component]
fn AuditRow(entry: AuditEntry) -> impl IntoView {
    let who = entry
        .actor
        .clone()
        .unwrap_or_else(|| entry.actor_kind.as_str().to_owned());
    let from = entry
        .address
        .clone()
        .map(|a| format!(" from {a}"))
        .unwrap_or_default();
    let detail = serde_json::to_string_pretty(&entry.detail).unwrap_or_default();
    let has_detail = entry.detail.as_object().is_some_and(|o| !o.is_empty());
    view! {
        <li class="min-w-0 rounded-lg border border-slate-300 bg-white p-3 text-sm" data-action=entry.action.clone()>
            <p class="break-words">
                <span class="font-semibold">{entry.action.clone()}</span>
                {entry.target.clone().map(|t| view! { " · " <code class="break-all text-xs">{t}</code> })}
            </p>
            <p class="break-words text-slate-700">
                {format!("{} · {who} ({}){from}", format_utc(entry.at), entry.actor_kind.as_str())}
            </p>
            {has_detail
                .then(|| {
                    view! {
                        <details class="mt-1">
                            <summary class=format!("min-h-11 cursor-pointer py-2 text-indigo-800 {FOCUS}")>"What changed"</summary>
                            <pre class="overflow-x-auto rounded bg-slate-50 p-2 text-xs">{detail}</pre>
                        </details>
                    }
                })}
        </li>
    }
}
