//! A profile's notification rules: which events go to which channels, and the shortest wait a
//! `route.waiting` is sent for. Edited in the profile editor (saved with the profile, so every
//! revision and its audited diff carry them), shown as text to people who may not edit.
//!
//! The channels offered are the ones the server has now (`list_channels`: the in-app list and
//! the configuration's webhooks and e-mail); a stored rule's channel the configuration no longer
//! has stays visible, marked, so saving never drops it silently (the server refuses it with a
//! message at its path). Checks are `policy::notify::check_rules`, the server's own.

use crate::{
    api::notifications::list_channels,
    components::{class_policy::ServerMessages, controls::FOCUS},
};
use leptos::prelude::*;
use policy::{
    limits::{MAX_MAX_WAIT_SECONDS, MAX_NOTIFICATION_RULES},
    notify::{check_rules, ChannelOption, NotificationRule, NotifyEventType},
};

/// One rule being edited.
#[derive(Debug, Clone, Copy)]
pub struct RuleDraft {
    key: u64,
    events: RwSignal<Vec<NotifyEventType>>,
    channels: RwSignal<Vec<String>>,
    /// The minimum wait in seconds, as typed.
    min_wait: RwSignal<String>,
}

impl RuleDraft {
    fn new(key: u64, rule: &NotificationRule) -> RuleDraft {
        RuleDraft {
            key,
            events: RwSignal::new(rule.events.clone()),
            channels: RwSignal::new(rule.channels.clone()),
            min_wait: RwSignal::new(rule.min_wait_seconds.to_string()),
        }
    }

    /// The rule as typed, if its minimum wait is a whole number (untracked).
    fn rule(&self) -> Option<NotificationRule> {
        let min_wait_seconds = self.min_wait.with_untracked(|t| {
            let t = t.trim();
            if t.is_empty() {
                Some(0)
            } else {
                t.parse::<u64>().ok()
            }
        })?;
        Some(NotificationRule {
            events: self.events.get_untracked(),
            channels: self.channels.get_untracked(),
            min_wait_seconds,
        })
    }
}

/// The drafts of stored rules, keyed from 0.
pub fn drafts(rules: &[NotificationRule]) -> Vec<RuleDraft> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| RuleDraft::new(i as u64, r))
        .collect()
}

/// The rules to save, or `None` when one of them does not pass the server's checks (the
/// editor shows why, at the rule).
pub fn collect(drafts: &[RuleDraft]) -> Option<Vec<NotificationRule>> {
    let rules: Option<Vec<NotificationRule>> = drafts.iter().map(RuleDraft::rule).collect();
    rules.filter(|r| check_rules(r).1.is_empty())
}

/// The rules editor (inside the profile editor's form).
#[component]
pub fn NotificationRulesEditor(rules: RwSignal<Vec<RuleDraft>>, messages: ServerMessages) -> impl IntoView {
    let channels = crate::codec::resource(|| (), |()| list_channels());
    let next_key = StoredValue::new(rules.with_untracked(|r| r.len() as u64));
    let full = move || rules.with(|r| r.len() >= MAX_NOTIFICATION_RULES);
    let add = move |_| {
        let key = next_key.get_value();
        next_key.set_value(key + 1);
        let rule = NotificationRule {
            events: vec![NotifyEventType::RouteNeedsPerson],
            channels: vec![policy::notify::IN_APP_CHANNEL.to_owned()],
            min_wait_seconds: 0,
        };
        rules.update(|r| r.push(RuleDraft::new(key, &rule)));
    };
    view! {
        <section aria-labelledby="notify-heading" data-testid="notification-rules">
            <h2 id="notify-heading" class="text-lg font-semibold text-slate-900">"Who is told what"</h2>
            <p class="mt-1 text-sm text-slate-600">
                "Each rule sends the events you tick to the channels you tick. The in-app list is every signed-in \
                 person's; webhooks and e-mail are set up by the operator in the server's configuration."
            </p>
            <Suspense fallback=|| view! { <p class="mt-2 text-sm">"Loading the channels…"</p> }>
                {move || Suspend::new(async move {
                    let offered = channels.await.unwrap_or_default();
                    let offered = StoredValue::new(offered);
                    view! {
                        <ol class="mt-3 space-y-3">
                            <For each=move || rules.get() key=|r| r.key let:draft>
                                <RuleRow draft=draft rules=rules offered=offered messages=messages />
                            </For>
                        </ol>
                    }
                })}
            </Suspense>
            <button
                type="button"
                class=format!(
                    "mt-3 min-h-11 rounded-md border border-indigo-700 bg-white px-4 text-sm font-semibold text-indigo-800 \
                     disabled:border-slate-300 disabled:text-slate-500 {FOCUS}",
                )
                disabled=full
                on:click=add
            >
                "Add a notification rule"
            </button>
        </section>
    }
}

#[component]
fn RuleRow(
    draft: RuleDraft,
    rules: RwSignal<Vec<RuleDraft>>,
    offered: StoredValue<Vec<ChannelOption>>,
    messages: ServerMessages,
) -> impl IntoView {
    let key = draft.key;
    let index = move || rules.with(|r| r.iter().position(|d| d.key == key).unwrap_or(0));
    // The problems of this rule, from the server's own checks, then the server's answer.
    let problems = move || {
        let i = index();
        let rule = NotificationRule {
            events: draft.events.get(),
            channels: draft.channels.get(),
            min_wait_seconds: draft.min_wait.with(|t| t.trim().parse::<u64>().unwrap_or(0)),
        };
        let mut out: Vec<String> = check_rules(std::slice::from_ref(&rule))
            .1
            .into_iter()
            .map(|e| e.message)
            .collect();
        let typed_ok = draft
            .min_wait
            .with(|t| t.trim().is_empty() || t.trim().parse::<u64>().is_ok());
        if !typed_ok {
            out.push(format!(
                "The minimum wait is a whole number of seconds (0 to {MAX_MAX_WAIT_SECONDS})."
            ));
        }
        for c in 0..rule.channels.len() {
            if let Some(m) = messages.get.run(format!("notifications[{i}].channels[{c}]")) {
                out.push(m);
            }
        }
        out
    };
    let toggle_event = move |e: NotifyEventType| {
        draft.events.update(|es| {
            if let Some(p) = es.iter().position(|x| *x == e) {
                es.remove(p);
            } else {
                es.push(e);
                es.sort();
            }
        });
    };
    let toggle_channel = move |id: String| {
        let i = index();
        draft.channels.update(|cs| {
            if let Some(p) = cs.iter().position(|x| *x == id) {
                cs.remove(p);
            } else {
                cs.push(id.clone());
            }
        });
        for c in 0..MAX_NOTIFICATION_RULES {
            messages.clear.run(format!("notifications[{i}].channels[{c}]"));
        }
    };
    // Channels offered now, then any this rule names that the server no longer has.
    let channel_list = move || {
        let mut list: Vec<(String, String, bool)> = offered.with_value(|o| {
            o.iter()
                .map(|c| {
                    let label = c.label.clone().unwrap_or_else(|| c.id.clone());
                    (c.id.clone(), format!("{label} ({})", c.kind), true)
                })
                .collect()
        });
        for id in draft.channels.get() {
            if !list.iter().any(|(i, _, _)| *i == id) {
                list.push((
                    id.clone(),
                    format!("{id} (not in the server's configuration now)"),
                    false,
                ));
            }
        }
        list
    };
    let waits = move || draft.events.with(|e| e.contains(&NotifyEventType::RouteWaiting));
    let wait_id = format!("rule-{key}-wait");
    view! {
        <li class="rounded-lg border border-slate-300 bg-white p-4" data-testid="notification-rule">
            <div class="flex flex-wrap items-center justify-between gap-2">
                <h3 class="text-base font-semibold">{move || format!("Rule {}", index() + 1)}</h3>
                <button
                    type="button"
                    class=format!("min-h-11 rounded-md border border-slate-400 px-3 text-sm {FOCUS}")
                    on:click=move |_| rules.update(|r| r.retain(|d| d.key != key))
                >
                    {move || format!("Remove rule {}", index() + 1)}
                </button>
            </div>
            <fieldset class="mt-2">
                <legend class="text-sm font-medium">"Events"</legend>
                <div class="mt-1 grid grid-cols-1 gap-1 sm:grid-cols-2">
                    {NotifyEventType::ALL
                        .into_iter()
                        .map(|e| {
                            view! {
                                <label class="flex min-h-11 items-center gap-2 text-sm">
                                    <input
                                        type="checkbox"
                                        class=format!("h-5 w-5 {FOCUS}")
                                        prop:checked=move || draft.events.with(|es| es.contains(&e))
                                        on:change=move |_| toggle_event(e)
                                    />
                                    <span>{e.label()} " " <code class="text-xs text-slate-600">{e.as_str()}</code></span>
                                </label>
                            }
                        })
                        .collect_view()}
                </div>
            </fieldset>
            <fieldset class="mt-2">
                <legend class="text-sm font-medium">"Channels"</legend>
                <div class="mt-1 grid grid-cols-1 gap-1 sm:grid-cols-2">
                    {move || {
                        channel_list()
                            .into_iter()
                            .map(|(id, label, configured)| {
                                let checked_id = id.clone();
                                view! {
                                    <label class=if configured { "flex min-h-11 items-center gap-2 text-sm" } else { "flex min-h-11 items-center gap-2 text-sm text-red-800" }>
                                        <input
                                            type="checkbox"
                                            class=format!("h-5 w-5 {FOCUS}")
                                            prop:checked=move || draft.channels.with(|cs| cs.contains(&checked_id))
                                            on:change=move |_| toggle_channel(id.clone())
                                        />
                                        <span class="break-all">{label}</span>
                                    </label>
                                }
                            })
                            .collect_view()
                    }}
                </div>
            </fieldset>
            <Show when=waits>
                <div class="mt-2">
                    <label for=wait_id.clone() class="block text-sm font-medium">"Only waits of at least (seconds)"</label>
                    <input
                        id=wait_id.clone()
                        type="text"
                        inputmode="numeric"
                        autocomplete="off"
                        class=format!("mt-1 h-11 w-32 rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}")
                        prop:value=move || draft.min_wait.get()
                        on:input=move |ev| draft.min_wait.set(event_target_value(&ev))
                    />
                </div>
            </Show>
            <ul class="mt-2 text-sm font-medium text-red-700" role="alert">
                {move || problems().into_iter().map(|p| view! { <li>{p}</li> }).collect_view()}
            </ul>
        </li>
    }
}

/// The rules as text, for people who may not edit them.
#[component]
pub fn NotificationRulesView(rules: Vec<NotificationRule>) -> impl IntoView {
    view! {
        <section aria-labelledby="notify-read-heading" class="mt-6" data-testid="notification-rules">
            <h2 id="notify-read-heading" class="text-lg font-semibold">"Who is told what"</h2>
            {if rules.is_empty() {
                view! { <p class="mt-1 text-sm text-slate-700">"Nobody: this profile has no notification rules."</p> }
                    .into_any()
            } else {
                view! {
                    <ul class="mt-2 space-y-2 text-sm">
                        {rules
                            .into_iter()
                            .map(|r| {
                                let events: Vec<&str> = r.events.iter().map(|e| e.as_str()).collect();
                                let wait = if r.events.contains(&NotifyEventType::RouteWaiting) && r.min_wait_seconds > 0 {
                                    format!(" (waits of {} s or more)", r.min_wait_seconds)
                                } else {
                                    String::new()
                                };
                                view! {
                                    <li class="break-words rounded-md border border-slate-300 bg-white p-3">
                                        {format!("{}{wait} → {}", events.join(", "), r.channels.join(", "))}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
        </section>
    }
}
