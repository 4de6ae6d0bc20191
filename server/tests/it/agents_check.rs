//! `recourse agents check` as an operator runs it: the real binary on a configuration file.
//! With the fake ACP agent and programs that are not agents, it names each problem and exits
//! non-zero; with the published agents (`RECOURSE_AGENTS_DIR`), the four entries of
//! `recourse.example.toml` (its paths moved to this machine's) all start and speak ACP.

use crate::common;

use common::fake_agent::FakeAgent;
use serde_json::json;
use std::process::Command;

fn check(config: &std::path::Path) -> (bool, String, String) {
    check_with(config, &[])
}

/// `recourse agents check` with these variables set (a configuration's secrets by name).
fn check_with(config: &std::path::Path, vars: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_recourse"))
        .args(["agents", "check", "--config"])
        .arg(config)
        .env_remove("RECOURSE_CONFIG")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn each_agent_that_does_not_start_speak_acp_or_offer_its_auth_method_is_named_and_the_exit_fails() {
    let dir = tempfile::tempdir().unwrap();
    let good = FakeAgent::new(
        dir.path(),
        "good",
        "anthropic",
        json!([{"initialize": {"loadSession": true, "authMethods": [{"id": "api-key", "name": "API key"}]}}]),
    );
    let no_auth = FakeAgent::new(dir.path(), "no-auth", "openai", json!([{}]));
    let root = good.root.to_str().unwrap().to_owned();
    let config = format!(
        "{good}{no_auth}\n[[agent]]\nid = \"not-acp\"\ncommand = \"/bin/true\"\nallowed_roots = [{root:?}]\n\
         [[agent]]\nid = \"missing\"\ncommand = \"/nonexistent/agent\"\nallowed_roots = [{root:?}]\n",
        good = good
            .toml("")
            .replace("provider_id =", "auth_method = \"api-key\"\nprovider_id ="),
        no_auth = no_auth
            .toml("")
            .replace("provider_id =", "auth_method = \"gemini-api-key\"\nprovider_id ="),
    );
    let path = dir.path().join("recourse.toml");
    std::fs::write(&path, config).unwrap();
    let (ok, out, err) = check(&path);
    assert!(!ok, "{out}\n{err}");
    let good_row = out
        .lines()
        .find(|l| l.starts_with("good "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(good_row.contains("fake-acp-agent"), "{good_row}");
    assert!(
        good_row.contains("api-key") && good_row.contains("yes"),
        "{good_row}"
    );
    assert!(!err.contains("good:"), "{err}");
    assert!(
        err.contains("no-auth: auth_method \"gemini-api-key\" is not one it offers (it offers none)"),
        "{err}"
    );
    assert!(err.contains("not-acp: "), "/bin/true speaks no ACP: {err}");
    assert!(err.contains("missing: it does not start"), "{err}");
    assert_eq!(out.lines().count(), 5, "a header and one row per agent:\n{out}");
    // Every agent it started is gone.
    for a in [&good, &no_auth] {
        for pid in a.pids() {
            assert!(!common::fake_agent::running(pid), "{} left running", a.id);
        }
    }
}

#[test]
fn the_four_published_agents_of_the_example_configuration_start_and_speak_acp() {
    let Some(agents) =
        common::agents::dir("agents_check::the_four_published_agents_of_the_example_configuration")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let homes = dir.path().join("homes");
    let example = include_str!("../../../recourse.example.toml")
        .replace("/srv/work", work.to_str().unwrap())
        .replace("/opt/recourse-agents", agents.to_str().unwrap())
        .replace("/var/lib/recourse/agents", homes.to_str().unwrap());
    // The entries as shipped, but with a `step` long enough for Node agents starting on a
    // loaded 2-core machine (Gemini CLI and Qwen Code took over 30 s there): Claude's entry
    // has a timeouts table, the others get one.
    assert!(example.contains("step = 30 "), "the example's step");
    let example = example.replace("step = 30 ", "step = 180 ");
    let mut parts = example.split("[agent.set_env]");
    let mut example = parts.next().unwrap().to_owned();
    for (i, part) in parts.enumerate() {
        if i > 0 {
            example.push_str("[agent.timeouts]\nstep = 180\n");
        }
        example.push_str("[agent.set_env]");
        example.push_str(part);
    }
    for id in ["claude", "codex", "gemini", "qwen"] {
        std::fs::create_dir_all(homes.join(id)).unwrap();
    }
    let path = dir.path().join("recourse.toml");
    std::fs::write(&path, example).unwrap();
    // The example's notification channels name their secrets; the whole file is loaded.
    let secrets = [
        (
            "RECOURSE_OPS_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
        ("SMTP_USER", "recourse"),
        ("SMTP_PASSWORD", "not-a-real-password"),
    ];
    let (ok, out, err) = check_with(&path, &secrets);
    println!("{out}");
    assert!(ok, "{out}\n{err}");
    for (id, version) in [
        ("claude", "0.23.1"),
        ("codex", "0.16.0"),
        ("gemini", "0.61.0"),
        ("qwen", "0.24.4"),
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row for {id}:\n{out}"));
        assert!(row.contains(version), "{row}");
        assert!(row.contains(" 1 "), "protocol version 1: {row}");
        assert!(row.contains("yes"), "all four advertise loadSession: {row}");
    }
}
