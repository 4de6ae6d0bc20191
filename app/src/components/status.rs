//! Loading, error and empty states, shared so every page says the same things the same way.
//! An error is always shown (never swallowed) with what the person can do about it.

use crate::error::AppError;
use leptos::prelude::*;

#[component]
pub fn Loading(#[prop(into)] what: String) -> impl IntoView {
    view! {
        <p role="status" class="mt-6 text-sm text-slate-700" data-testid="loading">
            {format!("Loading {what}…")}
        </p>
    }
}

/// A failed request, with a retry button when `retry` is given.
#[component]
pub fn ErrorPanel(error: AppError, #[prop(optional)] retry: Option<Callback<()>>) -> impl IntoView {
    let title = match error {
        AppError::NotFound => "Not found",
        AppError::Unreachable => "The server could not be reached",
        _ => "Something went wrong",
    };
    view! {
        <section role="alert" class="mt-6 rounded-lg border border-red-300 bg-red-50 p-4" data-testid="error">
            <h2 class="text-base font-semibold text-red-900">{title}</h2>
            <p class="mt-1 text-sm text-red-900">{error.to_string()}</p>
            {retry
                .map(|retry| {
                    view! {
                        <button
                            type="button"
                            class="mt-3 min-h-11 rounded-md border border-red-800 bg-white px-4 text-sm font-semibold text-red-900 \
                                   focus-visible:outline focus-visible:outline-2 focus-visible:outline-indigo-600"
                            on:click=move |_| retry.run(())
                        >
                            "Try again"
                        </button>
                    }
                })}
        </section>
    }
}

#[component]
pub fn Empty(#[prop(into)] id: String, #[prop(into)] title: String, children: Children) -> impl IntoView {
    let labelled_by = id.clone();
    view! {
        <section aria-labelledby=labelled_by class="mt-6 rounded-lg border border-dashed border-slate-400 bg-white p-6">
            <h2 id=id class="text-lg font-medium">{title}</h2>
            <div class="mt-2 text-slate-700">{children()}</div>
        </section>
    }
}
