//! Dynamic profiles: ordered candidates, each with a Transient and a Hard policy.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ProfilesPage() -> impl IntoView {
    view! {
        <Title text="Profiles" />
        <h1 class="text-2xl font-semibold">"Profiles"</h1>
        <p class="mt-1 text-slate-600">"Dynamic profiles list the candidates work may run on, in order."</p>
        <section aria-labelledby="empty-profiles" class="mt-6 rounded-lg border border-dashed border-slate-300 bg-white p-6">
            <h2 id="empty-profiles" class="text-lg font-medium">"No profiles yet"</h2>
            <p class="mt-2 text-slate-600">
                "A profile's candidates each get a policy for transient errors (the provider is overloaded, \
                 a short rate limit) and for hard errors (your plan's usage limit is used up, the key was rejected)."
            </p>
        </section>
    }
}
