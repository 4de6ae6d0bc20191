//! Access: the signed-in person's API tokens (for scripts, adapters and external runners), and,
//! for administrators, the accounts and the roles they can hold.
//!
//! A new token's secret is shown once, in a box with its own label and a Copy button, until the
//! person says they have copied it; only its hash is kept. Revoking asks first, in place, like
//! deleting a profile. Accounts are created with a first password and changed in place (role,
//! disabled, a new password); the server's refusals (a name taken, the last administrator) are
//! shown on the row where the change was made. Every rule is the server's; this page offers only
//! what the person may do.

use crate::{
    api::access::{
        list_accounts, list_roles, list_tokens, CreateAccount, CreateToken, RevokeToken, UpdateAccount,
    },
    auth::{IfAllowed, SessionResource},
    components::{
        controls::{FieldMessage, Switch, FOCUS},
        copy::CopyButton,
        status::{Empty, ErrorPanel, Loading},
        time::format_utc,
    },
    error::AppError,
};
use leptos::prelude::*;
use leptos_meta::Title;
use policy::{
    auth::{
        AccountCreate, AccountPatch, AccountView, Permission, Permissions, RoleView, TokenCreate, TokenView,
    },
    limits::MAX_TOKEN_DAYS,
};

const INPUT: &str = "mt-1 h-11 w-full rounded-md border border-slate-400 bg-white px-3 text-base";
const BUTTON: &str =
    "min-h-11 rounded-md border border-slate-400 bg-white px-4 text-sm font-medium text-slate-900";
const PRIMARY: &str = "min-h-11 rounded-md bg-indigo-700 px-4 text-sm font-semibold text-white";

/// A labelled one-line input with its message below (`{id}-error`), pointed at by
/// `aria-describedby` and flagged by `aria-invalid` while there is one.
#[component]
fn TextField(
    #[prop(into)] id: String,
    label: &'static str,
    value: RwSignal<String>,
    error: Signal<Option<String>>,
    #[prop(optional)] placeholder: &'static str,
    /// Digits only: the phone shows its number pad.
    #[prop(optional)]
    numeric: bool,
    /// A new password: hidden as typed, and offered to the password manager.
    #[prop(optional)]
    password: bool,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    view! {
        <div>
            <label for=id.clone() class="block text-sm font-medium">{label}</label>
            <input
                id=id
                type=if password { "password" } else { "text" }
                inputmode=numeric.then_some("numeric")
                autocomplete=if password { "new-password" } else { "off" }
                placeholder=(!placeholder.is_empty()).then_some(placeholder)
                class=format!("{INPUT} {FOCUS}")
                aria-describedby=error_id.clone()
                aria-invalid=move || error.with(Option::is_some).to_string()
                prop:value=move || value.get()
                on:input=move |ev| value.set(event_target_value(&ev))
            />
            <FieldMessage id=error_id message=error />
        </div>
    }
}

/// A server refusal for one field of a form, if there is one.
fn field_error(failure: RwSignal<Option<AppError>>, path: &'static str) -> Signal<Option<String>> {
    Signal::derive(move || {
        failure.with(|f| {
            f.as_ref()
                .and_then(|e| e.at(path).next().map(|e| e.message.clone()))
        })
    })
}

/// A refusal that is not about one field (a conflict, a missing right, the server down).
fn form_error(failure: RwSignal<Option<AppError>>) -> Signal<Option<String>> {
    Signal::derive(move || {
        failure.with(|f| match f {
            Some(AppError::Invalid { .. }) | None => None,
            Some(e) => Some(e.to_string()),
        })
    })
}

crate::pages::lazy_page!(AccessRoute, AccessPage);

#[component]
pub fn AccessPage() -> impl IntoView {
    let session = expect_context::<SessionResource>();
    let tokens_changed = RwSignal::new(0u32);
    let tokens = crate::codec::resource(move || tokens_changed.get(), |_| list_tokens());
    // Made with the page (not inside the permission check): the server's render waits for them.
    let accounts_changed = RwSignal::new(0u32);
    let accounts = crate::codec::resource(move || accounts_changed.get(), |_| list_accounts());
    let roles = crate::codec::resource(|| (), |_| list_roles());
    view! {
        <Title text="Access" />
        <h1 class="text-2xl font-semibold">"Access"</h1>
        <p class="mt-1 text-slate-700">
            "An API token lets a script, an adapter or an external runner act for your account, with the \
             permissions you give it (never more than your role's). Send it as "
            <code class="break-all">"Authorization: Bearer"</code>
            "; it is shown once, when it is made."
        </p>
        <Suspense fallback=|| view! { <Loading what="your session" /> }>
            {move || Suspend::new(async move {
                let mine = session.await.ok().and_then(|s| s.viewer).map(|w| w.permissions).unwrap_or_default();
                view! { <NewToken mine=mine changed=tokens_changed /> }
            })}
        </Suspense>
        <TokenList tokens=tokens changed=tokens_changed />
        <IfAllowed
            allowed=|p: Permissions| p.contains(Permission::Admin)
            note="Accounts and roles are managed by administrators."
        >
            <Accounts accounts=accounts roles=roles changed=accounts_changed />
        </IfAllowed>
    }
    .into_any()
}

/// The form that makes a token: a name, the permissions (of the person's own), a lifetime.
#[component]
fn NewToken(mine: Permissions, changed: RwSignal<u32>) -> impl IntoView {
    let create = ServerAction::<CreateToken>::new();
    let name = RwSignal::new(String::new());
    let days = RwSignal::new("90".to_owned());
    let chosen = RwSignal::new(Permissions::NONE);
    let failure: RwSignal<Option<AppError>> = RwSignal::new(None);
    let secret: RwSignal<Option<(String, String)>> = RwSignal::new(None);
    Effect::new(move |_| match create.value().get() {
        Some(Ok(created)) => {
            failure.set(None);
            name.set(String::new());
            secret.set(Some((created.token.name.clone(), created.secret.clone())));
            changed.update(|n| *n += 1);
        }
        Some(Err(e)) => failure.set(Some(e)),
        None => {}
    });
    let days_error = Signal::derive(move || {
        failure
            .with(|f| {
                f.as_ref()
                    .and_then(|e| e.at("expires_in_days").next().map(|e| e.message.clone()))
            })
            .or_else(|| {
                days.with(|d| match d.trim().parse::<u32>() {
                    Ok(n) if (1..=MAX_TOKEN_DAYS).contains(&n) => None,
                    _ => Some(format!("Give a whole number of days from 1 to {MAX_TOKEN_DAYS}.")),
                })
            })
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let Ok(expires_in_days) = days.get_untracked().trim().parse::<u32>() else {
            return;
        };
        let input = TokenCreate {
            name: name.get_untracked().trim().to_owned(),
            permissions: chosen.get_untracked(),
            profile_ids: None,
            expires_in_days,
        };
        // The checks the server makes, here first, with the same messages and paths.
        if let Err(errors) = input.check() {
            failure.set(Some(AppError::Invalid {
                errors: errors.errors,
            }));
            return;
        }
        failure.set(None);
        secret.set(None);
        create.dispatch(CreateToken { input });
    };
    let name_error = field_error(failure, "name");
    let permissions_error = field_error(failure, "permissions");
    let other_error = form_error(failure);
    view! {
        <section aria-labelledby="new-token" class="mt-6 rounded-lg border border-slate-300 bg-white p-4">
            <h2 id="new-token" class="text-lg font-semibold">"New API token"</h2>
            <form on:submit=on_submit novalidate class="mt-3 grid gap-3 sm:grid-cols-2">
                <TextField id="token-name" label="What it is for" value=name error=name_error placeholder="e.g. ci-runner" />
                <TextField id="token-days" label="Expires after (days)" value=days error=days_error numeric=true />
                <fieldset class="sm:col-span-2" aria-describedby="token-permissions-error">
                    <legend class="text-sm font-medium">"Permissions (yours to give)"</legend>
                    <div class="mt-1 grid gap-2 sm:grid-cols-3">
                        {Permission::ALL
                            .into_iter()
                            .filter(|p| mine.contains(*p))
                            .map(|p| {
                                view! {
                                    <Switch
                                        id=format!("token-permission-{}", p.as_str())
                                        label=p.as_str()
                                        checked=Signal::derive(move || chosen.with(|c| c.contains(p)))
                                        on_change=Callback::new(move |on: bool| {
                                            chosen.update(|c| *c = if on { c.with(p) } else { c.without(p) });
                                        })
                                    />
                                }
                            })
                            .collect_view()}
                    </div>
                    <FieldMessage id="token-permissions-error" message=permissions_error />
                </fieldset>
                <div class="sm:col-span-2">
                    <button type="submit" class=format!("{PRIMARY} {FOCUS}") disabled=move || create.pending().get()>
                        {move || if create.pending().get() { "Making the token…" } else { "Make token" }}
                    </button>
                    <p role="alert" class="mt-2 text-sm font-medium text-red-700" hidden=move || other_error.with(Option::is_none)>
                        {move || other_error.get().unwrap_or_default()}
                    </p>
                </div>
            </form>
            {move || {
                secret
                    .get()
                    .map(|(label, value)| {
                        view! {
                            <div role="status" class="mt-4 rounded-md border border-amber-400 bg-amber-50 p-3" data-testid="token-secret">
                                <p class="text-sm font-semibold text-amber-950">
                                    {format!("The token “{label}”: copy it now. It will not be shown again.")}
                                </p>
                                <label for="token-secret-value" class="sr-only">"The new token"</label>
                                <input
                                    id="token-secret-value"
                                    type="text"
                                    readonly=true
                                    class=format!("{INPUT} font-mono text-sm {FOCUS}")
                                    prop:value=value.clone()
                                />
                                <div class="mt-2 flex flex-wrap gap-2">
                                    <CopyButton target="token-secret-value" text=value.clone() />
                                    <button type="button" class=format!("{BUTTON} {FOCUS}") on:click=move |_| secret.set(None)>
                                        "I have copied it"
                                    </button>
                                </div>
                            </div>
                        }
                    })
            }}
        </section>
    }
}

/// The tokens the person may see, newest first, each with its state and a Revoke button.
#[component]
fn TokenList(
    tokens: crate::codec::Resource<Result<Vec<TokenView>, AppError>>,
    changed: RwSignal<u32>,
) -> impl IntoView {
    view! {
        <section aria-labelledby="tokens" class="mt-8">
            <h2 id="tokens" class="text-lg font-semibold">"API tokens"</h2>
            <Transition fallback=|| view! { <Loading what="the tokens" /> }>
                {move || Suspend::new(async move {
                    match tokens.await {
                        Ok(list) if list.is_empty() => {
                            view! {
                                <Empty id="no-tokens" title="No tokens">
                                    <p>"Make one above when a script or a runner needs to reach this server."</p>
                                </Empty>
                            }
                                .into_any()
                        }
                        Ok(mut list) => {
                            list.sort_by_key(|t| std::cmp::Reverse(t.created_at));
                            view! {
                                <ul class="mt-3 space-y-2" data-testid="token-list">
                                    {list.into_iter().map(|t| view! { <TokenRow token=t changed=changed /> }).collect_view()}
                                </ul>
                            }
                                .into_any()
                        }
                        Err(e) => view! { <ErrorPanel error=e retry=Callback::new(move |()| tokens.refetch()) /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn TokenRow(token: TokenView, changed: RwSignal<u32>) -> impl IntoView {
    let revoke = ServerAction::<RevokeToken>::new();
    let asking = RwSignal::new(false);
    let failure: RwSignal<Option<AppError>> = RwSignal::new(None);
    Effect::new(move |_| match revoke.value().get() {
        Some(Ok(())) => changed.update(|n| *n += 1),
        Some(Err(e)) => failure.set(Some(e)),
        None => {}
    });
    let id = StoredValue::new(token.id.clone());
    let name = token.name.clone();
    let permissions: Vec<&str> = token.permissions.iter().map(Permission::as_str).collect();
    let state = match (&token.revoked_at, token.last_used_at) {
        (Some(at), _) => format!("revoked {}", format_utc(*at)),
        (None, Some(used)) => format!("last used {}", format_utc(used)),
        (None, None) => "never used".to_owned(),
    };
    let revoked = token.revoked_at.is_some();
    let error = form_error(failure);
    view! {
        <li class="min-w-0 rounded-lg border border-slate-300 bg-white p-3 text-sm" data-token=name.clone()>
            <p class="break-words">
                <span class="font-semibold">{name.clone()}</span>
                " · "
                {format!("for {}", token.account)}
            </p>
            <p class="break-words text-slate-700">
                {format!(
                    "{} · made {} · expires {} · {state}",
                    permissions.join(", "),
                    format_utc(token.created_at),
                    format_utc(token.expires_at),
                )}
            </p>
            {(!revoked)
                .then(|| {
                    let name = name.clone();
                    view! {
                        <div class="mt-2 flex flex-wrap items-center gap-2">
                            <Show
                                when=move || asking.get()
                                fallback=move || {
                                    view! {
                                        <button type="button" class=format!("{BUTTON} {FOCUS}") on:click=move |_| asking.set(true)>
                                            "Revoke"
                                        </button>
                                    }
                                }
                            >
                                <span class="text-sm">{format!("Revoke “{name}”? Its next request is refused.")}</span>
                                <button
                                    type="button"
                                    class=format!("min-h-11 rounded-md bg-red-700 px-4 text-sm font-semibold text-white {FOCUS}")
                                    on:click=move |_| {
                                        failure.set(None);
                                        revoke.dispatch(RevokeToken { id: id.get_value() });
                                    }
                                >
                                    "Revoke it"
                                </button>
                                <button type="button" class=format!("{BUTTON} {FOCUS}") on:click=move |_| asking.set(false)>
                                    "Keep"
                                </button>
                            </Show>
                        </div>
                    }
                })}
            <p role="alert" class="mt-1 text-sm font-medium text-red-700" hidden=move || error.with(Option::is_none)>
                {move || error.get().unwrap_or_default()}
            </p>
        </li>
    }
}

/// Administrators: every account (role and enabled state changed in place), a form for a new
/// one, and the roles. The form and the roles stay put while the list is read again after a
/// change (so the form's confirmation stays on screen).
#[component]
fn Accounts(
    accounts: crate::codec::Resource<Result<Vec<AccountView>, AppError>>,
    roles: crate::codec::Resource<Result<Vec<RoleView>, AppError>>,
    changed: RwSignal<u32>,
) -> impl IntoView {
    view! {
        <section aria-labelledby="accounts" class="mt-10">
            <h2 id="accounts" class="text-lg font-semibold">"Accounts"</h2>
            <Transition fallback=|| view! { <Loading what="the accounts" /> }>
                {move || Suspend::new(async move {
                    match (accounts.await, roles.await) {
                        (Ok(list), Ok(roles)) => {
                            let names = StoredValue::new(roles.iter().map(|r| r.name.clone()).collect::<Vec<_>>());
                            view! {
                                <ul class="mt-3 space-y-2" data-testid="account-list">
                                    {list
                                        .into_iter()
                                        .map(|a| view! { <AccountRow account=a roles=names changed=changed /> })
                                        .collect_view()}
                                </ul>
                            }
                                .into_any()
                        }
                        (Err(e), _) | (_, Err(e)) => {
                            view! { <ErrorPanel error=e retry=Callback::new(move |()| { accounts.refetch(); roles.refetch(); }) /> }
                                .into_any()
                        }
                    }
                })}
            </Transition>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    roles.await.ok().map(|roles| {
                        let names = StoredValue::new(roles.iter().map(|r| r.name.clone()).collect::<Vec<_>>());
                        view! {
                            <NewAccount roles=names changed=changed />
                            <RoleList roles=roles />
                        }
                    })
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn AccountRow(
    account: AccountView,
    roles: StoredValue<Vec<String>>,
    changed: RwSignal<u32>,
) -> impl IntoView {
    let update = ServerAction::<UpdateAccount>::new();
    let failure: RwSignal<Option<AppError>> = RwSignal::new(None);
    // What the row shows: the server's answer once it has one.
    let shown = RwSignal::new(account.clone());
    // A new password changes nothing the list shows: the list is not read again (which would
    // make the row anew and take its "Password changed" confirmation away).
    let password_patch = StoredValue::new(false);
    Effect::new(move |_| match update.value().get() {
        Some(Ok(a)) => {
            failure.set(None);
            shown.set(a);
            if !password_patch.get_value() {
                changed.update(|n| *n += 1);
            }
        }
        Some(Err(e)) => failure.set(Some(e)),
        None => {}
    });
    let id = StoredValue::new(account.id.clone());
    let select_id = format!("role-{}", account.id);
    let send = move |patch: AccountPatch| {
        failure.set(None);
        password_patch.set_value(patch.password.is_some());
        update.dispatch(UpdateAccount {
            id: id.get_value(),
            patch,
        });
    };
    let error = Signal::derive(move || {
        failure.with(|f| {
            f.as_ref()
                .and_then(|e| match (e.at("role").next(), e.at("password").next()) {
                    (Some(field), _) => Some(field.message.clone()),
                    // Shown beside the password field instead.
                    (None, Some(_)) => None,
                    (None, None) => Some(e.to_string()),
                })
        })
    });
    let current_role = account.role.clone();
    let password = RwSignal::new(String::new());
    let password_id = format!("password-{}", account.id);
    let password_error = Signal::derive(move || {
        failure.with(|f| {
            f.as_ref()
                .and_then(|e| e.at("password").next().map(|e| e.message.clone()))
        })
    });
    let password_done = RwSignal::new(false);
    Effect::new(move |_| {
        if matches!(update.value().get(), Some(Ok(_))) && password.with_untracked(|p| !p.is_empty()) {
            password.set(String::new());
            password_done.set(true);
        }
    });
    let reset = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        password_done.set(false);
        let patch = AccountPatch {
            password: Some(password.get_untracked()),
            ..Default::default()
        };
        // The server's checks, here first, with its messages.
        if let Err(errors) = patch.check() {
            failure.set(Some(AppError::Invalid {
                errors: errors.errors,
            }));
            return;
        }
        send(patch);
    };
    let name = account.name.clone();
    view! {
        <li class="min-w-0 rounded-lg border border-slate-300 bg-white p-3 text-sm" data-account=account.name.clone()>
            <p class="break-words">
                <span class="font-semibold">{account.name.clone()}</span>
                {account.demo.then_some(" · demo account")}
                " · "
                <span data-testid="account-state">{move || if shown.with(|a| a.disabled) { "disabled" } else { "enabled" }}</span>
            </p>
            <div class="mt-2 flex flex-wrap items-end gap-3">
                <div>
                    <label for=select_id.clone() class="block text-sm font-medium">{format!("Role of {}", account.name)}</label>
                    <select
                        id=select_id
                        class=format!("mt-1 h-11 rounded-md border border-slate-400 bg-white px-3 text-base {FOCUS}")
                        on:change=move |ev| send(AccountPatch { role: Some(event_target_value(&ev)), ..Default::default() })
                    >
                        {roles
                            .get_value()
                            .into_iter()
                            .map(|r| {
                                let selected = r == current_role;
                                let label = r.clone();
                                view! { <option value=r selected=selected>{label}</option> }
                            })
                            .collect_view()}
                    </select>
                </div>
                <button
                    type="button"
                    class=format!("{BUTTON} {FOCUS}")
                    on:click=move |_| {
                        let disabled = !shown.with_untracked(|a| a.disabled);
                        send(AccountPatch { disabled: Some(disabled), ..Default::default() });
                    }
                >
                    {move || if shown.with(|a| a.disabled) { "Enable" } else { "Disable" }}
                </button>
            </div>
            <details class="mt-2">
                <summary class=format!("inline-flex min-h-11 cursor-pointer items-center text-sm font-medium text-indigo-800 {FOCUS}")>
                    {format!("Reset the password of {name}")}
                </summary>
                <form on:submit=reset novalidate class="mt-2 flex flex-wrap items-end gap-3">
                    <div class="min-w-0 flex-1">
                        <TextField
                            id=password_id
                            label="New password (their sessions end)"
                            value=password
                            error=password_error
                            password=true
                        />
                    </div>
                    <button type="submit" class=format!("{BUTTON} mb-6 {FOCUS}") disabled=move || update.pending().get()>
                        "Set password"
                    </button>
                </form>
                <p role="status" class="text-sm text-emerald-800">
                    {move || password_done.get().then_some("Password changed; their sessions ended.")}
                </p>
            </details>
            <p role="alert" class="mt-1 text-sm font-medium text-red-700" hidden=move || error.with(Option::is_none)>
                {move || error.get().unwrap_or_default()}
            </p>
        </li>
    }
}

#[component]
fn NewAccount(roles: StoredValue<Vec<String>>, changed: RwSignal<u32>) -> impl IntoView {
    let create = ServerAction::<CreateAccount>::new();
    let name = RwSignal::new(String::new());
    let role = RwSignal::new("viewer".to_owned());
    let password = RwSignal::new(String::new());
    let failure: RwSignal<Option<AppError>> = RwSignal::new(None);
    let made: RwSignal<Option<String>> = RwSignal::new(None);
    Effect::new(move |_| match create.value().get() {
        Some(Ok(a)) => {
            failure.set(None);
            name.set(String::new());
            password.set(String::new());
            made.set(Some(format!("Made the account {} ({}).", a.name, a.role)));
            changed.update(|n| *n += 1);
        }
        Some(Err(e)) => failure.set(Some(e)),
        None => {}
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let input = AccountCreate {
            name: name.get_untracked().trim().to_owned(),
            role: role.get_untracked(),
            password: password.get_untracked(),
        };
        made.set(None);
        if let Err(errors) = input.check() {
            failure.set(Some(AppError::Invalid {
                errors: errors.errors,
            }));
            return;
        }
        failure.set(None);
        create.dispatch(CreateAccount { input });
    };
    let name_error = field_error(failure, "name");
    let role_error = field_error(failure, "role");
    let password_error = field_error(failure, "password");
    let other_error = form_error(failure);
    view! {
        <section aria-labelledby="new-account" class="mt-6 rounded-lg border border-slate-300 bg-white p-4">
            <h3 id="new-account" class="text-base font-semibold">"New account"</h3>
            <form on:submit=on_submit novalidate class="mt-3 grid gap-3 sm:grid-cols-3">
                <TextField id="account-name" label="Name" value=name error=name_error />
                <div>
                    <label for="account-role" class="block text-sm font-medium">"Role"</label>
                    <select
                        id="account-role"
                        class=format!("{INPUT} {FOCUS}")
                        aria-describedby="account-role-error"
                        on:change=move |ev| role.set(event_target_value(&ev))
                    >
                        {roles
                            .get_value()
                            .into_iter()
                            .map(|r| {
                                let selected = r == "viewer";
                                let label = r.clone();
                                view! { <option value=r selected=selected>{label}</option> }
                            })
                            .collect_view()}
                    </select>
                    <FieldMessage id="account-role-error" message=role_error />
                </div>
                <TextField id="account-password" label="First password" value=password error=password_error password=true />
                <div class="sm:col-span-3">
                    <button type="submit" class=format!("{PRIMARY} {FOCUS}") disabled=move || create.pending().get()>
                        "Make account"
                    </button>
                    <p role="status" class="mt-2 text-sm text-slate-800">{move || made.get()}</p>
                    <p role="alert" class="mt-2 text-sm font-medium text-red-700" hidden=move || other_error.with(Option::is_none)>
                        {move || other_error.get().unwrap_or_default()}
                    </p>
                </div>
            </form>
        </section>
    }
}

#[component]
fn RoleList(roles: Vec<RoleView>) -> impl IntoView {
    view! {
        <section aria-labelledby="roles" class="mt-8">
            <h3 id="roles" class="text-base font-semibold">"Roles"</h3>
            <p class="mt-1 text-sm text-slate-700">
                "Built-in roles are fixed. Custom roles are made, changed and deleted through "
                <code class="break-all">"/api/v1/roles"</code>
                "."
            </p>
            <ul class="mt-2 space-y-1 text-sm" data-testid="role-list">
                {roles
                    .into_iter()
                    .map(|r| {
                        let permissions: Vec<&str> = r.permissions.iter().map(Permission::as_str).collect();
                        view! {
                            <li class="break-words">
                                <span class="font-semibold">{r.name}</span>
                                {if r.builtin { " (built-in): " } else { " (custom): " }}
                                {permissions.join(", ")}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </section>
    }
}
