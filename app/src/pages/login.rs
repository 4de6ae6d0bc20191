//! The login page: a name and a password, posted as a plain form to `POST /login` (it works
//! before the page's script has loaded), and what went wrong when the server sends the person
//! back: one message for a wrong name or password, whether or not the account exists. With no
//! account yet, the page says exactly how to create the first one.

use crate::{
    auth::{SessionResource, FIRST_ADMIN_COMMAND},
    components::controls::FOCUS,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

crate::pages::lazy_page!(LoginRoute, LoginPage);
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let error = move || match query.read().get("error").as_deref() {
        Some("failed") => Some("The name or the password is wrong."),
        Some("limited") => Some("Too many sign-in attempts. Wait a minute, then try again."),
        _ => None,
    };
    let next = move || query.read().get("next").unwrap_or_else(|| "/".to_owned());
    let session = expect_context::<SessionResource>();
    let input_class = format!(
        "mt-1 block min-h-11 w-full rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}"
    );
    view! {
        <Title text="Sign in" />
        <section aria-labelledby="login-title" class="mx-auto w-full max-w-sm">
            <h1 id="login-title" class="text-2xl font-semibold">"Sign in"</h1>
            {move || {
                error()
                    .map(|message| {
                        view! {
                            <p role="alert" data-testid="login-error" class="mt-4 rounded-md border border-red-300 bg-red-50 p-3 text-sm text-red-900">
                                {message}
                            </p>
                        }
                    })
            }}
            <form method="post" action="/login" class="mt-4 space-y-4">
                <input type="hidden" name="next" value=next />
                <div>
                    <label for="login-name" class="block text-sm font-medium">"Name"</label>
                    <input id="login-name" name="name" type="text" autocomplete="username" required class=input_class.clone() />
                </div>
                <div>
                    <label for="login-password" class="block text-sm font-medium">"Password"</label>
                    <input id="login-password" name="password" type="password" autocomplete="current-password" required class=input_class />
                </div>
                <button
                    type="submit"
                    class=format!("min-h-11 w-full rounded-md bg-indigo-700 px-4 text-base font-semibold text-white hover:bg-indigo-800 {FOCUS}")
                >
                    "Sign in"
                </button>
            </form>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let Ok(view) = session.await else {
                        return ().into_any();
                    };
                    if !view.accounts_exist {
                        view! {
                            <section data-testid="no-accounts" class="mt-6 rounded-lg border border-amber-300 bg-amber-50 p-4 text-sm text-amber-950">
                                <h2 class="text-base font-semibold">"No account exists yet"</h2>
                                <p class="mt-1">
                                    "Create the first administrator on the server, in the folder Recourse runs in \
                                     (add " <code>"--database PATH"</code> " if it uses another database file). \
                                     The command asks for the password:"
                                </p>
                                <pre class="mt-2 overflow-x-auto rounded bg-white p-2 font-mono"><code>{FIRST_ADMIN_COMMAND}</code></pre>
                            </section>
                        }
                            .into_any()
                    } else if let Some(who) = view.viewer {
                        view! {
                            <p class="mt-6 text-sm text-slate-700">
                                {format!("You are signed in as {}. ", who.name)}
                                <a href="/" class=format!("inline-flex min-h-11 items-center text-indigo-800 underline {FOCUS}")>
                                    "Go to routes"
                                </a>
                            </p>
                        }
                            .into_any()
                    } else {
                        ().into_any()
                    }
                })}
            </Suspense>
        </section>
    }
}
