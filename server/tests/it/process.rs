//! The real `recourse` binary as an operator runs it.

use crate::common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_recourse");

/// Blocking HTTP/1.0 GET; enough for a health probe without pulling in a client.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// Starts `recourse serve` (JSON logs) on `db`, on a port the OS picks, and waits until it
/// logs the address it bound; the rest of its log follows.
fn serve_on(
    db: &std::path::Path,
) -> (
    std::process::Child,
    String,
    std::io::Lines<BufReader<std::process::ChildStderr>>,
) {
    let mut child = Command::new(BIN)
        .args([
            "--log-format",
            "json",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--database",
        ])
        .arg(db)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("server exited before listening").unwrap();
        if let Some(rest) = line.split("\"addr\":\"").nth(1) {
            break rest.split('"').next().unwrap().to_owned();
        }
    };
    (child, addr, lines)
}

/// [`serve_on`], its log drained.
fn serve_quietly(db: &std::path::Path) -> (std::process::Child, String) {
    let (child, addr, lines) = serve_on(db);
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    (child, addr)
}

#[test]
fn serve_creates_its_database_answers_healthz_and_stops_cleanly_on_sigterm() {
    requires!(sqlite);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("serve.db");
    let (mut child, addr, lines) = serve_on(&db);
    let started = Instant::now();
    let health = loop {
        if let Some(resp) = http_get(&addr, "/healthz") {
            break resp;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no answer from {addr}"
        );
    };
    assert!(
        health.starts_with("HTTP/1.0 200") || health.starts_with("HTTP/1.1 200"),
        "{health}"
    );
    assert!(health.ends_with(r#"{"status":"ok","database":"ok"}"#), "{health}");
    assert!(db.exists(), "database file was created");

    let status = common::terminate(&mut child, Duration::from_secs(60));
    assert!(status.success(), "exit status after SIGTERM: {status}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|l| l.contains("recourse stopped cleanly")),
        "{rest:?}"
    );
}

#[test]
fn a_second_serve_on_the_same_sqlite_file_is_refused_until_the_first_is_gone() {
    requires!(sqlite);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("one.db");
    let (mut first, addr) = serve_quietly(&db);
    // The second one names the holder and exits, touching nothing (it never opened the file).
    let second = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--database"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("is served already, by process") && err.contains(&first.id().to_string()),
        "{err}"
    );
    assert!(err.contains("one SQLite file has one serving process"), "{err}");
    assert!(http_get(&addr, "/healthz").is_some_and(|h| h.contains(r#""status":"ok""#)));
    // A `sqlite:` URL naming the same file is the same file.
    let url = format!("sqlite:{}", db.display());
    let third = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--database", &url])
        .output()
        .unwrap();
    assert!(
        !third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
    // Killed outright, the first lets the file go: the next serve starts.
    first.kill().unwrap();
    first.wait().unwrap();
    let (mut next, addr) = serve_quietly(&db);
    assert!(http_get(&addr, "/healthz").is_some_and(|h| h.contains(r#""status":"ok""#)));
    assert!(common::terminate(&mut next, Duration::from_secs(60)).success());
}

#[test]
fn help_lists_every_subcommand() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for sub in ["serve", "migrate", "classify", "catalogue"] {
        assert!(help.contains(sub), "{sub} missing from:\n{help}");
    }
}

/// `serve --help` names both backends (it used to say "one SQLite file", though several
/// replicas serve one PostgreSQL database).
#[test]
fn serve_help_names_both_backends() {
    let out = Command::new(BIN).args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let about = help.lines().next().unwrap_or_default();
    assert!(
        about.contains("SQLite") && about.contains("PostgreSQL") && about.contains("replicas"),
        "{help}"
    );
    assert!(!help.contains("one SQLite file"), "{help}");
}

#[test]
fn migrate_creates_the_database_and_exits_zero() {
    requires!(sqlite);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let out = Command::new(BIN)
        .arg("migrate")
        .arg("--database")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(db.exists());
}

#[test]
fn an_unwritable_database_location_fails_with_a_clear_message() {
    requires!(sqlite);
    let out = Command::new(BIN)
        .args(["migrate", "--database", "/proc/nope/x.db"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open database"), "{err}");
}

#[test]
fn classify_prints_one_json_line_per_envelope_and_an_error_line_for_a_malformed_one() {
    let input = concat!(
        r#"{"items":[{"kind":"http","status":529,"body":"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}]}"#,
        "\n",
        "{not json\n",
        r#"{"items":[{"kind":"stderr","lines":["something odd"]}]}"#,
        "\n"
    );
    let mut child = Command::new(BIN)
        .args(["classify", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["code"], "provider_overloaded");
    assert_eq!(lines[0]["gate"]["automatic_recovery"], true);
    assert!(lines[1]["error"].is_object());
    assert_eq!(lines[2]["class"], "unclassified");
}

#[test]
fn catalogue_check_passes_on_the_shipped_fixtures_and_fails_on_a_wrong_one() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");
    let out = Command::new(BIN)
        .args(["catalogue", "check", "--fixtures", fixtures])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("clean"), "{report}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("classifier/test");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("wrong-expectation.json"),
        r#"{"note":"x","input":{"items":[{"kind":"stderr","lines":["something odd"]}]},"expect":{"code":"quota_limited","class":"hard","classifier_rule":"nope"}}"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["catalogue", "check", "--fixtures"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("problem"));
}

#[test]
fn user_add_reads_the_password_from_standard_input_and_never_takes_or_repeats_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::backend::database(dir.path(), "users.db");
    let run = |args: &[&str], stdin: &str| {
        let mut child = Command::new(BIN)
            .args(args)
            .arg("--database")
            .arg(&db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, _, err) = run(&["user", "add", "ada", "--role", "admin"], "tooshort\n");
    assert!(!ok, "a short password is refused");
    assert!(err.contains("at least 12"), "{err}");
    assert!(!err.contains("tooshort"), "the password is never repeated: {err}");

    let (ok, _, err) = run(
        &["user", "add", "ada", "--role", "admin"],
        "a long passphrase here\n",
    );
    assert!(ok, "{err}");
    assert!(!err.contains("passphrase"), "{err}");
    let (ok, _, err) = run(
        &["user", "add", "ADA", "--role", "viewer"],
        "another long passphrase\n",
    );
    assert!(!ok && err.contains("exists"), "names ignore case: {err}");
    let (ok, _, err) = run(
        &["user", "add", "bob", "--role", "root"],
        "another long passphrase\n",
    );
    assert!(!ok && err.contains("No such role"), "{err}");
    // There is no way to give the password as an argument.
    let (ok, _, _) = run(
        &[
            "user",
            "add",
            "bob",
            "--role",
            "admin",
            "--password",
            "a long passphrase here",
        ],
        "",
    );
    assert!(!ok);

    let (ok, out, _) = run(&["user", "list"], "");
    assert!(ok);
    assert_eq!(out, "NAME\tROLE\tSTATE\nada\tadmin\tactive\n");
}
