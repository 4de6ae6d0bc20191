//! Notifications from the real `recourse serve`: a webhook receiver of the test's own sees
//! exactly one accepted delivery per event when Recourse is killed (SIGKILL) in the middle of a
//! delivery and started again; on PostgreSQL, two replicas send each event once and one takes
//! over what a killed one was sending; and e-mail reaches a real SMTP sink (`aiosmtpd` from
//! PyPI, which `./dev`'s test set-up installs and this test starts and stops; without it the test
//! is a counted skip, a failure under `RECOURSE_REQUIRE_SMTP=1`), naming and
//! linking the route without any evidence text.
//!
//! Real time (the servers run on their own clocks); the tests wait on the receiver's arrivals,
//! the sink's mailbox or the server's answers, with generous bounds as failure timeouts only.

use crate::common;

use common::{
    backend, http,
    receiver::{Mode, Receiver, SECRET},
    spawn_serve_env,
};
use serde_json::{json, Value};
use std::{collections::HashMap, path::Path, time::Duration};

const LIMIT: Duration = Duration::from_secs(60);

fn write_config(dir: &Path, channels: &str) -> std::path::PathBuf {
    let path = dir.join("recourse.toml");
    std::fs::write(
        &path,
        format!(
            "[notify]\npublic_url = \"https://recourse.example.com\"\nallow_networks = [\"127.0.0.0/8\"]\n\
             backoff_initial_ms = 200\nbackoff_max_ms = 1000\n{channels}"
        ),
    )
    .unwrap();
    path
}

/// A webhook channel to `receiver`. Its timeout (20 s) outlasts the time a test takes to kill
/// the server holding a delivery, so the kill, not the timeout, ends that attempt.
fn webhook(receiver: &Receiver) -> String {
    format!(
        "[[channel]]\nid = \"ops\"\nkind = \"webhook\"\nurl = \"{}\"\nsecret_env = \"RECOURSE_TEST_WEBHOOK_SECRET\"\ntimeout_seconds = 20\n",
        receiver.url()
    )
}

/// The accepted copy of `id` arrived after `killed`: it was sent again after the kill (and not
/// after an attempt that ended some other way first).
fn sent_again_after(accepted: &[common::receiver::Delivery], id: &str, killed: std::time::Instant) {
    let copy = accepted
        .iter()
        .find(|d| d.id == id)
        .expect("the held event was accepted");
    assert!(
        copy.arrived > killed,
        "the held delivery was accepted before the kill: the test did not kill during its delivery"
    );
}

fn serve(database: &str, config: &Path) -> (std::process::Child, String) {
    let (child, addr, _) = spawn_serve_env(
        database,
        &["--config", config.to_str().unwrap()],
        false,
        &[("RECOURSE_TEST_WEBHOOK_SECRET", SECRET)],
    );
    (child, addr)
}

/// A profile whose simulated candidate fails with evidence nobody knows (the route stops for
/// a person), telling `channels`.
fn profile(addr: &str, channels: &[&str]) -> String {
    let unknown = json!({"phase": "prompt", "items": [{"kind": "stderr",
        "lines": ["frobnicator jammed: token=sk-ant-abcdefghijklmnop"]}]});
    let (status, v) = http(
        addr,
        "POST",
        "/api/v1/profiles",
        Some(&json!({"name": "told", "targets": [{"id": "main", "dispatcher": "simulated", "provider_id": "sim",
                "script": [{"outcome": "fail", "envelope": unknown}]}],
            "policy": {"version": 1, "candidates": [{"id": "main",
                "transient": common::disabled(), "hard": common::disabled()}]},
            "notifications": [{"events": ["route.needs_person"], "channels": channels}]})),
    )
    .unwrap();
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

fn start(addr: &str, profile: &str, i: usize) -> String {
    let (status, v) = http(
        addr,
        "POST",
        "/api/v1/routes",
        Some(
            &json!({"profile_id": profile, "title": format!("Fix the build {i}"),
            "caller": {"kind": "kanban_task", "reference": "task-1", "invocation_id": format!("inv-{i}")}}),
        ),
    )
    .unwrap();
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// Waits until `n` deliveries are settled as delivered (the server's own answer).
async fn settled(addr: &str, n: usize) {
    let end = std::time::Instant::now() + LIMIT;
    loop {
        let rows = http(
            addr,
            "GET",
            "/api/v1/notifications/deliveries?status=delivered",
            None,
        )
        .unwrap()
        .1;
        if rows.as_array().is_some_and(|r| r.len() >= n) {
            return;
        }
        assert!(std::time::Instant::now() < end, "never settled: {rows}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many times each event id was accepted.
fn tally(accepted: &[common::receiver::Delivery]) -> HashMap<String, usize> {
    let mut by_id = HashMap::new();
    for d in accepted {
        *by_id.entry(d.id.clone()).or_insert(0) += 1;
    }
    by_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_accepted_once_across_a_kill_during_its_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(Mode::HoldFirst).await;
    let config = write_config(dir.path(), &webhook(&receiver));
    let database = backend::database(dir.path(), "recourse.db");
    let (mut first, addr) = serve(&database, &config);
    let mut arrivals = receiver.arrivals.subscribe();
    let p = profile(&addr, &["ops", "in_app"]);
    let routes: Vec<String> = (0..3).map(|i| start(&addr, &p, i)).collect();
    // The first delivery to arrive is held by the receiver: Recourse is killed while it waits
    // for the answer.
    let held = tokio::time::timeout(LIMIT, arrivals.recv())
        .await
        .unwrap()
        .unwrap();
    receiver.wait_accepted(LIMIT, |a| a.len() >= 2).await;
    // The other two are settled (a kill between a receiver's answer and its settlement would
    // send that one again, with the same webhook-id: at least once, as README says).
    settled(&addr, 2).await;
    first.kill().unwrap();
    first.wait().unwrap();
    let killed = std::time::Instant::now();

    let (mut second, _) = serve(&database, &config);
    let accepted = receiver.wait_accepted(LIMIT, |a| tally(a).len() >= 3).await;
    second.kill().unwrap();
    second.wait().unwrap();

    let counts = tally(&accepted);
    assert!(
        counts.values().all(|n| *n == 1),
        "each event accepted once: {counts:?}"
    );
    assert!(counts.contains_key(&held), "the interrupted one was sent again");
    sent_again_after(&accepted, &held, killed);
    let seen = receiver.seen();
    assert_eq!(
        seen.iter().filter(|d| d.id == held).count(),
        2,
        "the retry after the restart carried the same webhook-id"
    );
    assert!(seen.iter().all(|d| d.signature_ok), "every request is signed");
    let mut told: Vec<String> = accepted
        .iter()
        .map(|d| d.body["data"]["route_id"].as_str().unwrap().to_owned())
        .collect();
    told.sort();
    let mut expected = routes.clone();
    expected.sort();
    assert_eq!(told, expected, "one event per route");
    for d in &accepted {
        assert_eq!(d.body["type"], "route.needs_person");
        assert!(
            !d.raw.contains("frobnicator") && !d.raw.contains("sk-ant"),
            "{}",
            d.raw
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_send_each_event_once_and_one_takes_over_what_a_killed_one_was_sending() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(Mode::HoldFirst).await;
    let config = write_config(dir.path(), &webhook(&receiver));
    let database = backend::database(dir.path(), "replicas.db");
    let (mut a, addr_a) = serve(&database, &config);
    let mut arrivals = receiver.arrivals.subscribe();
    let p = profile(&addr_a, &["ops"]);
    start(&addr_a, &p, 0);
    // Replica A is sending the first event (held by the receiver) when B starts.
    let held = tokio::time::timeout(LIMIT, arrivals.recv())
        .await
        .unwrap()
        .unwrap();
    let (mut b, addr_b) = serve(&database, &config);
    // Both replicas deliver the next events: each is accepted once.
    for i in 1..=10 {
        start(if i % 2 == 0 { &addr_a } else { &addr_b }, &p, i);
    }
    receiver.wait_accepted(LIMIT, |a| tally(a).len() >= 10).await;
    settled(&addr_b, 10).await;
    // A dies in the middle of its delivery: B sends it once A's lease has run out.
    a.kill().unwrap();
    a.wait().unwrap();
    let killed = std::time::Instant::now();
    let accepted = receiver.wait_accepted(LIMIT, |a| tally(a).len() >= 11).await;
    sent_again_after(&accepted, &held, killed);
    b.kill().unwrap();
    b.wait().unwrap();
    let counts = tally(&accepted);
    assert!(
        counts.values().all(|n| *n == 1),
        "each event accepted once: {counts:?}"
    );
    assert_eq!(counts.get(&held), Some(&1));
    assert!(receiver.seen().iter().all(|d| d.signature_ok));
}

/// The Python of the aiosmtpd virtual environment `./dev` installs (`RECOURSE_AIOSMTPD`; a test
/// that uses it starts with `requires!(smtp)`).
fn aiosmtpd() -> std::path::PathBuf {
    std::env::var_os("RECOURSE_AIOSMTPD")
        .expect("requires!(smtp) checked it")
        .into()
}

/// The SMTP sink, stopped when dropped.
struct Sink(std::process::Child);

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_reaches_the_smtp_sink_naming_and_linking_the_route_without_evidence() {
    requires!(smtp);
    let dir = tempfile::tempdir().unwrap();
    let mailbox = dir.path().join("mailbox");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _sink = Sink(
        std::process::Command::new(aiosmtpd())
            .args([
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                &format!("127.0.0.1:{port}"),
                "-c",
                "aiosmtpd.handlers.Mailbox",
            ])
            .arg(&mailbox)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Ready when it takes connections.
    let end = std::time::Instant::now() + LIMIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < end, "the SMTP sink never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config = write_config(
        dir.path(),
        &format!(
            "[[channel]]\nid = \"oncall\"\nkind = \"email\"\nhost = \"127.0.0.1\"\nport = {port}\nsecurity = \"none\"\n\
             from = \"Recourse <recourse@example.com>\"\nto = [\"oncall@example.com\", \"Lead <lead@example.com>\"]\n"
        ),
    );
    let database = backend::database(dir.path(), "recourse.db");
    let (mut server, addr) = serve(&database, &config);
    let p = profile(&addr, &["oncall"]);
    let r = start(&addr, &p, 7);
    let new = mailbox.join("new");
    let text = loop {
        let files: Vec<_> = std::fs::read_dir(&new)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        if let Some(f) = files.first() {
            break std::fs::read_to_string(f).unwrap();
        }
        assert!(std::time::Instant::now() < end, "no mail arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The mail server took it: the delivery is settled as delivered.
    loop {
        let deliveries: Value = http(&addr, "GET", "/api/v1/notifications/deliveries", None)
            .unwrap()
            .1;
        if deliveries[0]["status"] == "delivered" {
            break;
        }
        assert!(std::time::Instant::now() < end, "never settled: {deliveries}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    let unfolded = text.replace("=\r\n", "").replace("=\n", "");
    assert!(text.contains("Subject: [Recourse] Route"), "{text}");
    assert!(unfolded.contains(&r), "names the route: {text}");
    assert!(
        unfolded.contains(&format!("https://recourse.example.com/routes/{r}")),
        "links to it: {text}"
    );
    assert!(
        unfolded.contains("Fix the build 7"),
        "names it by its title: {text}"
    );
    assert!(text.contains("oncall@example.com") && text.contains("lead@example.com"));
    assert!(
        !unfolded.contains("frobnicator") && !unfolded.contains("sk-ant"),
        "no evidence text: {text}"
    );
}
