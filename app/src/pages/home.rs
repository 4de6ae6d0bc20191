//! The routes overview: live routed work, or an explanation of what will appear here.

use crate::components::disclosure::Disclosure;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn HomePage() -> impl IntoView {
    view! {
        <Title text="Routes" />
        <h1 class="text-2xl font-semibold">"Routes"</h1>
        <p class="mt-1 text-slate-600">"Routed agent work and how each route is recovering from provider failures."</p>
        <section aria-labelledby="empty-routes" class="mt-6 rounded-lg border border-dashed border-slate-300 bg-white p-6">
            <h2 id="empty-routes" class="text-lg font-medium">"No active routes"</h2>
            <p class="mt-2 text-slate-600">
                "When a caller starts work on a dynamic profile, its route appears here with its state, \
                 the failure class, the retry ordinal and the next deadline."
            </p>
        </section>
        <div class="mt-6">
            <Disclosure id="how-recourse-decides" label="How Recourse decides what to do after a failure">
                <ol class="list-decimal space-y-1 pl-5">
                    <li>"Evidence from the agent or API is classified into a stable code and a class: transient or hard."</li>
                    <li>"Only a current failure that happened before any output or tool activity may recover automatically; anything else waits for a person."</li>
                    <li>"The candidate's policy for that class decides: wait for a trusted reset, retry with exponential backoff, then skip to the next candidate or stop."</li>
                    <li>"Every decision is stored before it is acted on, so timers survive restarts and nothing is dispatched twice."</li>
                </ol>
            </Disclosure>
        </div>
    }
}
