//! What the agent is doing: the transcript of the route's current attempt (its messages as
//! text, its thoughts folded, its tool calls as rows with kind, title and status), and the
//! transcripts of earlier attempts the server still keeps, folded. Each says which attempt and
//! candidate it belongs to and how that attempt ended, and above all whether the agent had
//! shown output before it failed: that is what decides whether Recourse may recover on its own.
//!
//! The text is what the event stream sends, redacted on the server (a key the agent printed
//! shows as `[redacted]`); this view adds nothing to it. The route page reloads the transcripts
//! as the agent's updates arrive.

use crate::{components::status::ErrorPanel, error::AppError};
use leptos::prelude::*;
use policy::{
    api::{DispatchOutcome, DispatchRecord},
    transcript::{AttemptTranscript, TranscriptItem},
};

/// How an attempt ended, read together with its transcript, in words.
fn ending(record: Option<&DispatchRecord>, shown_output: bool) -> &'static str {
    let after = shown_output;
    match record.and_then(|r| r.outcome) {
        Some(DispatchOutcome::Failed) if after => {
            "failed after output: a person decides before it runs again"
        }
        Some(DispatchOutcome::Failed) => "failed before any output",
        Some(DispatchOutcome::Succeeded) => "succeeded",
        Some(DispatchOutcome::Aborted) => "stopped",
        Some(DispatchOutcome::Superseded) => "never started",
        Some(DispatchOutcome::Ambiguous) => "unknown after a restart",
        None if after => "running, output shown",
        None => "running, no output yet",
    }
}

/// The route's transcripts. `current` is the attempt the route is on, if any.
#[component]
pub fn Transcripts(
    transcripts: crate::codec::Resource<Result<Vec<AttemptTranscript>, AppError>>,
    dispatches: Vec<DispatchRecord>,
    current: Option<u32>,
) -> impl IntoView {
    // Owned by the closures, not stored in the panel: a transcript read that ends after the
    // panel was replaced (the route changed meanwhile) must not reach a disposed value.
    let dispatches = std::sync::Arc::new(dispatches);
    view! {
        <section aria-labelledby="transcript-heading" class="mt-6" data-testid="transcripts">
            <h2 id="transcript-heading" class="text-lg font-semibold">"What the agent is doing"</h2>
            <p class="text-sm text-slate-700">
                "What an agent Recourse runs said and did in this route's recent attempts, as it happened \
                 (secrets redacted). Agents reached over HTTP, external runners and simulated candidates \
                 report no such detail."
            </p>
            <Transition fallback=|| ()>
                {move || {
                    let dispatches = dispatches.clone();
                    Suspend::new(async move {
                    match transcripts.await {
                        Ok(list) if list.is_empty() => view! {
                            <p class="mt-2 text-sm text-slate-700" data-testid="no-transcript">
                                "Nothing from an agent yet."
                            </p>
                        }.into_any(),
                        Ok(mut list) => {
                            // The current attempt first, then the others, newest first.
                            list.sort_by_key(|a| (Some(a.attempt) != current, std::cmp::Reverse(a.attempt)));
                            view! {
                                <div class="mt-2 space-y-3">
                                    {list.into_iter().enumerate().map(|(i, a)| {
                                        let record = dispatches.iter().find(|r| r.attempt == a.attempt).cloned();
                                        // The running attempt, or when none runs (the route
                                        // waits, or stopped for a person) the newest: what a
                                        // person opening the page came to read.
                                        let open = Some(a.attempt) == current || current.is_none() && i == 0;
                                        view! { <AttemptView attempt=a record=record open=open /> }
                                    }).collect_view()}
                                </div>
                            }.into_any()
                        }
                        Err(e) => view! { <ErrorPanel error=e retry=Callback::new(move |()| transcripts.refetch()) /> }.into_any(),
                    }
                    })
                }}
            </Transition>
        </section>
    }
}

#[component]
fn AttemptView(attempt: AttemptTranscript, record: Option<DispatchRecord>, open: bool) -> impl IntoView {
    let t = attempt.transcript;
    let output = t.has_output();
    let candidate = record
        .as_ref()
        .map_or_else(|| "?".to_owned(), |r| r.candidate_id.clone());
    let ended = ending(record.as_ref(), output);
    let heading = format!(
        "Attempt {} on {candidate} (generation {}): {ended}",
        attempt.attempt, attempt.generation
    );
    let failed_after = output && record.as_ref().and_then(|r| r.outcome) == Some(DispatchOutcome::Failed);
    let items = t.items;
    let truncated = t.truncated;
    view! {
        <details
            open=open
            class="min-w-0 rounded-lg border border-slate-300 bg-white"
            data-attempt=attempt.attempt.to_string()
            data-output=output.to_string()
        >
            <summary class="flex min-h-11 cursor-pointer items-center px-3 py-2 text-sm font-semibold text-slate-900">
                <span class="break-words">{heading}</span>
            </summary>
            <div class="border-t border-slate-200 px-3 py-2 text-sm">
                {failed_after.then(|| view! {
                    <p class="mb-2 rounded-md bg-amber-50 p-2 text-amber-950" data-testid="after-output">
                        "The agent had answered or used a tool before this failure, so repeating the attempt \
                         could repeat its work: Recourse stops for a person instead."
                    </p>
                })}
                {if items.is_empty() {
                    view! { <p class="text-slate-700">"Nothing was shown in this attempt."</p> }.into_any()
                } else {
                    view! {
                        <ol class="space-y-2" data-testid="transcript">
                            {items.into_iter().map(|item| view! { <li class="min-w-0"><Item item=item /></li> }).collect_view()}
                        </ol>
                    }.into_any()
                }}
                {truncated.then(|| view! {
                    <p class="mt-2 text-xs text-slate-600">"Longer than the server keeps: the rest was not kept."</p>
                })}
            </div>
        </details>
    }
}

#[component]
fn Item(item: TranscriptItem) -> impl IntoView {
    match item {
        TranscriptItem::Message { text } => view! {
            <p class="whitespace-pre-wrap break-words text-slate-900" data-item="message">{text}</p>
        }
        .into_any(),
        TranscriptItem::Thought { text } => view! {
            <details data-item="thought">
                <summary class="inline-flex min-h-11 cursor-pointer items-center text-slate-700">"Thought"</summary>
                <p class="whitespace-pre-wrap break-words text-slate-700">{text}</p>
            </details>
        }
        .into_any(),
        TranscriptItem::ToolCall { id, kind, title, status } => view! {
            <div class="flex flex-wrap items-center gap-2 rounded-md bg-slate-50 p-2" data-item="tool-call" data-tool=id>
                <span class="rounded bg-slate-200 px-1.5 text-xs font-medium text-slate-900">
                    {kind.unwrap_or_else(|| "tool".to_owned())}
                </span>
                <span class="min-w-0 break-words text-slate-900">{title.unwrap_or_else(|| "(no title)".to_owned())}</span>
                <span class="text-xs text-slate-700" data-status="">{status.unwrap_or_else(|| "pending".to_owned())}</span>
            </div>
        }
        .into_any(),
    }
}
