//! Accounts and tokens from the server's command line, and the demo account.
//!
//! - `recourse user add NAME --role ROLE`: the first administrator (or any account). The
//!   password comes from a prompt (asked twice) when standard input is a terminal, else from
//!   the first line of standard input; never from an argument, where it would show in the
//!   process list and the shell's history.
//! - `recourse user list`.
//! - `recourse token add --account NAME --name WHAT --permissions p1,p2 [--profile ID]...
//!   [--expires-in-days N]`: prints the secret on standard output (once; only its hash is
//!   kept), so scripts and tests get a token without the UI.
//! - `serve --demo`: the account `demo` (role `profile_manager`, a random password nobody
//!   needs), which pages sign visitors into automatically.

use super::{accounts::ManageError, Actor, Auth, AuthSettings};
use crate::{
    cli::{TokenAddArgs, UserAddArgs},
    clock::SystemClock,
    db,
    store::{accounts::AccountRow, Store},
};
use anyhow::{bail, Context};
use policy::auth::{AccountCreate, BuiltinRole, TokenCreate};
use std::{
    io::{BufRead, IsTerminal, Write},
    process::ExitCode,
    sync::Arc,
};

/// The demo account's name.
pub const DEMO_ACCOUNT: &str = "demo";

async fn open(database: &str) -> anyhow::Result<Auth> {
    let pool = db::open(database).await?;
    Ok(Auth::new(
        Store::new(pool),
        Arc::new(SystemClock),
        AuthSettings::default(),
    ))
}

fn explain(e: ManageError) -> anyhow::Error {
    match e {
        ManageError::Invalid(errors) => {
            let lines: Vec<String> = errors
                .errors
                .iter()
                .map(|e| {
                    format!(
                        "{}: {}",
                        if e.path.is_empty() { "input" } else { &e.path },
                        e.message
                    )
                })
                .collect();
            anyhow::anyhow!(lines.join("\n"))
        }
        other => anyhow::anyhow!(other.to_string()),
    }
}

/// The new account's password: prompted for (twice) on a terminal, else the first line of
/// standard input.
fn read_password(name: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(format!("Password for {name}: "))
            .context("cannot read the password from the terminal")?;
        let again = rpassword::prompt_password("The same password again: ")
            .context("cannot read the password from the terminal")?;
        if first != again {
            bail!("the two passwords differ; nothing was created");
        }
        Ok(first)
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        let line = line.strip_suffix('\n').unwrap_or(&line);
        Ok(line.strip_suffix('\r').unwrap_or(line).to_owned())
    }
}

/// `recourse user add NAME --role ROLE`.
pub async fn user_add(args: UserAddArgs) -> anyhow::Result<ExitCode> {
    let password = read_password(&args.name)?;
    let auth = open(&args.db.database).await?;
    let input = AccountCreate {
        name: args.name,
        role: args.role,
        password,
    };
    let account = auth
        .create_account(&Actor::cli(), &input, false)
        .await
        .map_err(explain)?;
    auth.store().close().await;
    eprintln!(
        "account `{}` created with role `{}`; sign in at the server's /login",
        account.name, account.role
    );
    Ok(ExitCode::SUCCESS)
}

/// `recourse user list`: name, role, and whether the account is disabled.
pub async fn user_list(database: &str) -> anyhow::Result<ExitCode> {
    let auth = open(database).await?;
    let accounts = auth.store().accounts().await?;
    auth.store().close().await;
    let mut out = std::io::stdout().lock();
    writeln!(out, "NAME\tROLE\tSTATE")?;
    for a in accounts {
        let state = match (a.disabled, a.demo) {
            (true, _) => "disabled",
            (false, true) => "demo",
            (false, false) => "active",
        };
        writeln!(out, "{}\t{}\t{state}", a.name, a.role)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `recourse token add`: prints the new token's secret, alone on standard output.
pub async fn token_add(args: TokenAddArgs) -> anyhow::Result<ExitCode> {
    let auth = open(&args.db.database).await?;
    let Some(account) = auth.store().account_by_name(&args.account).await? else {
        bail!(
            "no account named `{}` (`recourse user list` lists them)",
            args.account
        );
    };
    let permissions = if args.permissions.iter().any(|p| p == "all") {
        auth.role_permissions(&account.role).await?
    } else {
        super::accounts::parse_permissions(&args.permissions).map_err(anyhow::Error::msg)?
    };
    let input = TokenCreate {
        name: args.name,
        permissions,
        profile_ids: (!args.profiles.is_empty()).then_some(args.profiles),
        expires_in_days: args.expires_in_days,
    };
    let created = auth
        .issue_token(&Actor::cli(), &account, &input)
        .await
        .map_err(explain)?;
    auth.store().close().await;
    println!("{}", created.secret);
    eprintln!(
        "token `{}` for `{}` created, expires {}; the secret above is shown once",
        created.token.name, created.token.account, created.token.expires_at
    );
    Ok(ExitCode::SUCCESS)
}

impl Auth {
    /// The demo account, when this server signs visitors into it and it is usable.
    pub async fn demo_account(&self) -> Result<Option<AccountRow>, super::AuthError> {
        if !self.settings().demo {
            return Ok(None);
        }
        Ok(self
            .store()
            .account_by_name(DEMO_ACCOUNT)
            .await?
            .filter(|a| a.demo && !a.disabled))
    }

    /// Creates the demo account if it is missing (`serve --demo`). An account of that name
    /// that is not the demo account is left alone, and nobody is signed in automatically.
    pub async fn ensure_demo_account(&self) -> anyhow::Result<()> {
        match self.store().account_by_name(DEMO_ACCOUNT).await? {
            Some(a) if a.demo => Ok(()),
            Some(_) => {
                tracing::warn!(
                    "an account named `demo` exists and is not the demo account; visitors are not signed in automatically"
                );
                Ok(())
            }
            None => {
                let password = super::token::generate()?;
                let input = AccountCreate {
                    name: DEMO_ACCOUNT.to_owned(),
                    role: BuiltinRole::ProfileManager.name().to_owned(),
                    password,
                };
                self.create_account(&Actor::cli(), &input, true)
                    .await
                    .map_err(explain)?;
                Ok(())
            }
        }
    }
}
