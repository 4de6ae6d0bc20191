//! Login timing: a wrong password for an account that exists against a name nobody has (and a
//! disabled account). All three must cost the same argon2id verification, so the time of a
//! failed login does not tell whether the account exists.
//!
//! `cargo bench -p server --bench login` (or, without a release build of the server,
//! `cargo test -p server --bench login`: argon2 is optimized in every profile, see the
//! workspace Cargo.toml) prints the median and p90 of each kind, interleaved so a busy machine
//! slows them alike. `RECOURSE_BENCH_QUICK=1` runs fewer rounds.

#![allow(clippy::print_stdout, unreachable_pub)]

use policy::auth::{AccountCreate, AccountPatch};
use server::{
    auth::{Actor, Auth, AuthSettings},
    clock::SystemClock,
    store::Store,
};
use std::{sync::Arc, time::Instant};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn main() {
    let rounds = if std::env::var_os("RECOURSE_BENCH_QUICK").is_some() {
        10
    } else {
        40
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("login.db");
        let pool = server::db::open(path.to_str().expect("path"))
            .await
            .expect("database");
        let auth = Auth::new(Store::new(pool), Arc::new(SystemClock), AuthSettings::default());
        let password = "correct horse battery staple".to_owned();
        for name in ["ada", "gone"] {
            let input = AccountCreate {
                name: name.to_owned(),
                role: "viewer".to_owned(),
                password: password.clone(),
            };
            let account = auth
                .create_account(&Actor::cli(), &input, false)
                .await
                .expect("account");
            if name == "gone" {
                let patch = AccountPatch {
                    disabled: Some(true),
                    ..AccountPatch::default()
                };
                auth.update_account(&Actor::cli(), &account.id, &patch)
                    .await
                    .expect("disable");
            }
        }
        server::auth::password::warm_up();
        let kinds = [
            (
                "existing account, wrong password",
                "ada",
                "not the right password",
            ),
            ("no such account", "nobody-has-this", "not the right password"),
            ("disabled account, right password", "gone", password.as_str()),
        ];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
        for _ in 0..rounds {
            for (i, (_, name, pw)) in kinds.iter().enumerate() {
                let start = Instant::now();
                let result = auth.check_credentials(name, pw).await;
                times[i].push(start.elapsed().as_secs_f64() * 1000.0);
                assert!(result.is_err(), "every one of these fails");
            }
        }
        println!("login failures, {rounds} rounds each (ms):");
        for (i, (label, _, _)) in kinds.iter().enumerate() {
            let t = &mut times[i];
            t.sort_by(f64::total_cmp);
            println!(
                "  {label:<36} median {:>7.2}  p90 {:>7.2}",
                percentile(t, 0.5),
                percentile(t, 0.9)
            );
        }
    });
}
