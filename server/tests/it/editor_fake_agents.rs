//! `recourse acp` with fake agents beneath (`fake-acp-agent`; always run, on either backend):
//! the real binary, driven over its standard input and output by the `agent-client-protocol`
//! crate's client side, against a real `recourse serve`:
//! - a switch is said, and the agent's requests reach the editor;
//! - a mode pins the session to one agent, and the fail-over mode lets it switch;
//! - the editor session survives a server restart while its agent runs;
//! - an editor that goes away mid-prompt cancels it (the route stops) and `recourse acp` exits;
//! - malformed ACP gets JSON-RPC errors and the process goes on;
//! - a session's folder must lie under the roots of every agent of the profile;
//! - only the four most recently used sessions keep their agents running between turns;
//! - a refused token, an unreachable server and a profile out of reach stop it at start with a
//!   clear message.
//! - it runs as `recourse-acp` when that is beside `recourse`, in its own process when
//!   `recourse` is installed alone, and a `recourse-acp` of another version hands back.
//!
//! The tests with the published agents beneath are in `editor.rs`.

use crate::common;

use agent_client_protocol::{v1::ConnectionTo, Agent, Client};
use common::{
    editor::{self as ed, skip, stop, wait_until, Acp, Answer},
    *,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A served Recourse with fake agents configured (no published agent needed).
struct FakeWorld {
    dir: tempfile::TempDir,
    serve: std::process::Child,
    addr: String,
    config: PathBuf,
    agents: Vec<common::fake_agent::FakeAgent>,
}

impl FakeWorld {
    /// Each agent of its own provider (so one's circuit never holds another).
    fn new(agents: &[(&str, Value)]) -> FakeWorld {
        let dir = tempfile::tempdir().unwrap();
        let agents: Vec<_> = agents
            .iter()
            .map(|(id, attempts)| {
                common::fake_agent::FakeAgent::new(
                    dir.path(),
                    id,
                    &format!("provider-{id}"),
                    attempts.clone(),
                )
            })
            .collect();
        let config = dir.path().join("recourse.toml");
        std::fs::write(
            &config,
            agents.iter().map(|a| a.toml("") + "\n").collect::<String>(),
        )
        .unwrap();
        let (serve, addr, _) = spawn_serve(
            backend::database(dir.path(), "r.db"),
            &["--config", config.to_str().unwrap()],
            false,
        );
        FakeWorld {
            dir,
            serve,
            addr,
            config,
            agents,
        }
    }

    fn acp(&self, profile: &str) -> Acp {
        Acp::start(
            self.dir.path(),
            &self.addr,
            profile,
            &self.config,
            &token_for(&self.addr).unwrap(),
            &[],
        )
    }
}

impl Drop for FakeWorld {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fake_agents_a_switch_is_said_and_the_agents_requests_reach_the_editor() {
    let overloaded = json!([{"prompt": [{"error": {"code": -32603,
        "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}}]}]);
    let asks = json!([{"prompt": [
        {"request": {"method": "session/request_permission", "params": {"toolCall": {"toolCallId": "t1", "title": "Write"},
            "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}, {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}},
        {"request": {"method": "fs/read_text_file", "params": {"path": "/etc/hostname"}}},
        {"message": "hello from b"},
        {"respond": {"stopReason": "end_turn"}}]}]);
    let w = FakeWorld::new(&[("a", overloaded), ("b", asks)]);
    let p = ed::profile(
        &w.addr,
        "fakes",
        &[("a", "Agent A", skip(), skip()), ("b", "Agent B", stop(), stop())],
    );
    let mut acp = w.acp(&p);
    let root = w.agents[0].root.clone();
    let (first, second) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &root).await?;
            // `recourse acp` replaced itself with the editor's own, smaller binary.
            assert_eq!(
                acp.program().file_name().and_then(|n| n.to_str()),
                Some("recourse-acp")
            );
            let first = ed::turn(&mut session, "Say hello", Answer::Allow, |_| false).await;
            let second = ed::turn(&mut session, "Once more", Answer::Allow, |_| false).await;
            Ok((first, second))
        })
        .await
        .unwrap();
    assert_eq!(
        first.stop_reason.as_deref(),
        Some("end_turn"),
        "{first:?}\n{}",
        acp.logged()
    );
    assert_eq!(
        first.recourse(),
        ["Agent A is overloaded (provider_overloaded); continuing on Agent B"],
        "{first:?}"
    );
    assert!(first.messages().contains(&"hello from b".to_owned()), "{first:?}");
    let methods: Vec<&str> = first.requests.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        ["session/request_permission", "fs/read_text_file"],
        "{first:?}"
    );
    // The editor's answers reached the agent.
    let answers: Vec<Value> = w.agents[1]
        .log()
        .into_iter()
        .filter(|l| l["recv"]["result"].is_object())
        .map(|l| l["recv"]["result"].clone())
        .collect();
    assert!(
        answers.iter().any(|r| r["outcome"]["optionId"] == "yes"),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|r| r["content"] == "from the editor"),
        "{answers:?}"
    );
    // The next prompt runs on the same agent process and session, not a new one.
    assert_eq!(second.stop_reason.as_deref(), Some("end_turn"), "{second:?}");
    assert!(second.recourse().is_empty(), "{second:?}");
    assert_eq!(
        w.agents[1].received("initialize"),
        1,
        "one process for both turns"
    );
    assert_eq!(w.agents[1].received("session/prompt"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_pins_the_session_to_one_agent_and_the_fail_over_mode_lets_it_switch() {
    let overloaded = json!([{"prompt": [{"error": {"code": -32603,
        "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}}]}]);
    let answers = json!([{"prompt": [{"message": "hello from b"}, {"respond": {"stopReason": "end_turn"}}]}]);
    let w = FakeWorld::new(&[("a", overloaded), ("b", answers)]);
    let p = ed::profile(
        &w.addr,
        "fakes",
        &[("a", "Agent A", skip(), skip()), ("b", "Agent B", stop(), stop())],
    );
    let mut acp = w.acp(&p);
    let root = w.agents[0].root.clone();
    let (pinned, auto, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let session = ed::open(&cx, &root).await?;
            let id = session.session_id().0.to_string();
            // The modes came with the session; pin it to Agent A.
            let set = |mode: &str| {
                agent_client_protocol::UntypedMessage::new(
                    "session/set_mode",
                    json!({"sessionId": id, "modeId": mode}),
                )
                .unwrap()
            };
            let bad: Result<Value, _> = cx.send_request(set("nope")).block_task().await;
            assert!(bad.is_err(), "an unknown mode is refused");
            let _: Value = cx.send_request(set("a")).block_task().await?;
            let mut session = session;
            let pinned = ed::turn(&mut session, "Say hello", Answer::Reject, |_| false).await;
            let _: Value = cx.send_request(set("auto")).block_task().await?;
            let auto = ed::turn(&mut session, "Say hello", Answer::Reject, |_| false).await;
            Ok((pinned, auto, id))
        })
        .await
        .unwrap();
    assert_eq!(
        pinned.stop_reason.as_deref(),
        Some("end_turn"),
        "{pinned:?}\n{}",
        acp.logged()
    );
    let said = pinned.recourse();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("Agent A is overloaded (provider_overloaded, transient), and this session's mode runs it on Agent A only"), "{said:?}");
    assert!(
        said[0].contains("fail-over mode") && !said[0].contains("\"switch\""),
        "{said:?}"
    );
    assert_eq!(
        w.agents[1].received("session/prompt"),
        1,
        "pinned, Agent B never ran: only the fail-over turn did"
    );
    // Back to failing over: the stopped prompt's route ends, and a new one runs on Agent B
    // (Agent A's provider is behind the circuit its overload opened).
    assert_eq!(auto.stop_reason.as_deref(), Some("end_turn"), "{auto:?}");
    assert!(auto.messages().contains(&"hello from b".to_owned()), "{auto:?}");
    assert_eq!(
        w.agents[0].received("session/prompt"),
        1,
        "Agent A was not prompted again"
    );
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["candidate_id"], "b", "{route}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_session_survives_a_server_restart_while_its_agent_runs() {
    let go = tempfile::tempdir().unwrap();
    let go = go.path().join("go");
    let slow = json!([{"prompt": [{"wait_file": go}, {"message": "done after the restart"}, {"respond": {"stopReason": "end_turn"}}]}]);
    let mut w = FakeWorld::new(&[("a", slow)]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = w.acp(&p);
    let acp_log = acp.log.clone();
    let root = w.agents[0].root.clone();
    let database = backend::database(w.dir.path(), "r.db");
    let (log, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &root).await?;
            let id = session.session_id().0.to_string();
            session.send_prompt("Take your time").unwrap();
            // The agent runs (it waits for the file); the server goes down and comes back on
            // the same address and database.
            let agent = &w.agents[0];
            let prompted = async {
                while agent.received("session/prompt") == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), prompted)
                .await
                .expect("the agent is prompted");
            w.serve.kill().unwrap();
            w.serve.wait().unwrap();
            // The agent finishes while the server is down: the report waits for it, retrying.
            std::fs::write(&go, "").unwrap();
            let retrying = async {
                while !acp_log.exists()
                    || !std::fs::read_to_string(&acp_log)
                        .unwrap_or_default()
                        .contains("trying again")
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), retrying)
                .await
                .expect("recourse acp retries");
            w.serve = tokio::task::block_in_place(|| restart_serve(&database, &w.addr, &w.config));
            let mut log = ed::TurnLog::default();
            loop {
                match tokio::time::timeout(ed::TURN_LIMIT, session.read_update())
                    .await
                    .expect("the turn ends")
                {
                    Ok(agent_client_protocol::v1::SessionMessage::Message(
                        agent_client_protocol::Dispatch::Notification(n),
                    )) => log.updates.push(n.params["update"].clone()),
                    Ok(agent_client_protocol::v1::SessionMessage::PromptResponse(r)) => {
                        log.stop_reason = r.ok().and_then(|r| {
                            serde_json::to_value(&r).unwrap()["stopReason"]
                                .as_str()
                                .map(str::to_owned)
                        });
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => panic!("{e:?}"),
                }
            }
            Ok((log, id))
        })
        .await
        .unwrap();
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("end_turn"),
        "{log:?}\n{}",
        acp.logged()
    );
    assert!(
        log.messages().contains(&"done after the restart".to_owned()),
        "{log:?}"
    );
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(
        route["snapshot"]["state"], "active",
        "the success was recorded: {route}"
    );
    assert!(route["snapshot"]["attempt"].is_null(), "{route}");
}

/// One turn of a one-agent profile through `binary` started as `recourse acp` (with `env`):
/// the program its process ran the turn as, the turn, and the program of the agent's parent
/// (its guard).
async fn one_turn_through(binary: &Path, env: &[(&str, &str)]) -> (PathBuf, ed::TurnLog, PathBuf) {
    let hello = json!([{"prompt": [{"message": "hello"}, {"respond": {"stopReason": "end_turn"}}]}]);
    let w = FakeWorld::new(&[("a", hello)]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = Acp::start_binary(
        binary,
        w.dir.path(),
        &w.addr,
        &p,
        &w.config,
        &token_for(&w.addr).unwrap(),
        &[],
        env,
    );
    let root = w.agents[0].root.clone();
    let agent = &w.agents[0];
    let (program, turn, guard) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &root).await?;
            let program = acp.program();
            let turn = ed::turn(&mut session, "Say hello", Answer::Allow, |_| false).await;
            // The agent, kept for the next prompt, runs under its guard.
            let pids = agent.pids();
            assert_eq!(pids.len(), 1, "{pids:?}");
            let status = std::fs::read_to_string(format!("/proc/{}/status", pids[0])).unwrap();
            let parent = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .unwrap()
                .trim()
                .to_owned();
            let guard = std::fs::read_link(format!("/proc/{parent}/exe")).unwrap();
            Ok((program, turn, guard))
        })
        .await
        .unwrap();
    assert_eq!(
        turn.stop_reason.as_deref(),
        Some("end_turn"),
        "{turn:?}\n{}",
        acp.logged()
    );
    assert_eq!(turn.messages(), ["hello"], "{turn:?}");
    (program, turn, guard)
}

/// `recourse` installed somewhere alone (without `recourse-acp` beside it) serves the editor in
/// its own process: the same turn, the same agent guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recourse_installed_alone_serves_the_editor_in_its_own_process() {
    let place = tempfile::tempdir().unwrap();
    let binary = place.path().join("recourse");
    // A link, not a copy: a file this test process just wrote could still be open in a child
    // another test is forking, and could not be executed then (ETXTBSY).
    if std::fs::hard_link(env!("CARGO_BIN_EXE_recourse"), &binary).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_recourse"), &binary).unwrap();
    }
    let (program, _, guard) = one_turn_through(&binary, &[]).await;
    assert_eq!(program, binary, "no exec");
    assert_eq!(guard, binary);
}

/// A `recourse-acp` of another version than the `recourse` that ran it (one left from an
/// earlier install) hands back to that `recourse`, which serves the editor itself (and does not
/// exec again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recourse_acp_of_another_version_hands_back_to_recourse() {
    let own = Path::new(env!("CARGO_BIN_EXE_recourse-acp"));
    let (program, _, guard) =
        one_turn_through(own, &[(server::editor::binary::EXEC_MARKER, "0.0.0-earlier")]).await;
    let recourse = std::fs::canonicalize(env!("CARGO_BIN_EXE_recourse")).unwrap();
    assert_eq!(program, recourse);
    assert_eq!(guard, recourse);
}

/// An editor that goes away while a prompt runs cancels it, as the person's cancel would: the
/// agent is told `session/cancel`, the route stops (`stopped_by_user`, never left running
/// without anyone to see it), and `recourse acp` exits by itself with its agent gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_that_goes_away_mid_prompt_cancels_it_and_recourse_acp_exits() {
    let slow = json!([{"prompt": [{"wait_cancel": true}, {"respond": {"stopReason": "cancelled"}}]}]);
    let w = FakeWorld::new(&[("a", slow)]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = w.acp(&p);
    let root = w.agents[0].root.clone();
    let agent = &w.agents[0];
    let session_id = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &root).await?;
            session.send_prompt("Take your time").unwrap();
            let prompted = async {
                while agent.received("session/prompt") == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), prompted)
                .await
                .expect("the agent is prompted");
            // The editor goes away here, its prompt still running.
            Ok(session.session_id().0.to_string())
        })
        .await
        .unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(60), acp.child.wait())
        .await
        .unwrap_or_else(|_| panic!("recourse acp exits once the editor is gone:\n{}", acp.logged()))
        .unwrap();
    assert!(status.success(), "{status}\n{}", acp.logged());
    assert_eq!(agent.received("session/cancel"), 1, "{:?}", agent.log());
    assert_eq!(agent.received("session/prompt"), 1, "never prompted again");
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["state"], "action_required", "{route}");
    assert_eq!(route["snapshot"]["action_reason"], "stopped_by_user", "{route}");
    let pids = agent.pids();
    assert_eq!(pids.len(), 1, "{pids:?}");
    wait_until("the agent to be gone", std::time::Duration::from_secs(30), || {
        !common::fake_agent::running(pids[0])
    });
}

/// A session's folder must lie under the roots of every agent of the profile (any of them may
/// take its prompts): a folder that only some of them may work in is refused at `session/new`,
/// with a JSON-RPC error, before any route exists. An accepted session is told its commands
/// after the answer that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_folder_must_lie_under_the_roots_of_every_agent_of_the_profile() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let w = FakeWorld::new(&[("a", json!([{}])), ("b", json!([{}]))]);
    let p = ed::profile(
        &w.addr,
        "fakes",
        &[("a", "Agent A", skip(), skip()), ("b", "Agent B", stop(), stop())],
    );
    let root = w.agents[0].root.clone();
    let narrow = root.join("b-only");
    std::fs::create_dir_all(&narrow).unwrap();
    // recourse acp's own configuration: agent b may work under `b-only` alone.
    let wide = format!("allowed_roots = [{:?}]", root.to_str().unwrap());
    let b = w.agents[1].toml("");
    assert!(b.contains(&wide), "{b}");
    let b = b.replace(
        &wide,
        &format!("allowed_roots = [{:?}]", narrow.to_str().unwrap()),
    );
    let config = w.dir.path().join("narrow.toml");
    std::fs::write(&config, format!("{}\n{b}", w.agents[0].toml(""))).unwrap();
    let mut acp = Acp::start(
        w.dir.path(),
        &w.addr,
        &p,
        &config,
        &token_for(&w.addr).unwrap(),
        &[],
    );
    let mut stdin = acp.child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(acp.child.stdout.take().unwrap()).lines();
    let cases = [
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
            None,
        ),
        (
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": root, "mcpServers": []}}),
            Some(-32602),
        ),
        (
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": narrow, "mcpServers": []}}),
            None,
        ),
    ];
    let mut next = async || -> Value {
        let text = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("a message")
            .unwrap()
            .unwrap_or_else(|| panic!("recourse acp ended:\n{}", acp.logged()));
        serde_json::from_str(&text).unwrap()
    };
    let mut session_id = Value::Null;
    for (message, expected) in cases {
        stdin.write_all(format!("{message}\n").as_bytes()).await.unwrap();
        // Nothing about a session comes before the answer that names it.
        let answer = next().await;
        assert_eq!(answer["id"], message["id"], "{answer}");
        match expected {
            Some(code) => {
                assert_eq!(answer["error"]["code"], code, "{message} -> {answer}");
                assert!(
                    answer["error"]["data"]
                        .as_str()
                        .is_some_and(|m| m.contains("allowed_roots") && m.contains("every agent")),
                    "{answer}"
                );
            }
            None => {
                assert!(answer["result"].is_object(), "{message} -> {answer}");
                session_id = answer["result"]["sessionId"].clone();
            }
        }
    }
    // After the answer: the session's commands, the manual actions.
    let update = next().await;
    assert_eq!(update["method"], "session/update", "{update}");
    assert_eq!(update["params"]["sessionId"], session_id, "{update}");
    let commands: Vec<&str> = update["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap_or_else(|| panic!("{update}"))
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(commands, ["retry", "switch", "stop"], "{update}");
}

/// An editor opens a session per conversation and never closes one: beyond the four most
/// recently used sessions, a session's agent is stopped after another session's turn (not
/// while it runs one), and that session's next prompt starts a new agent and is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_four_most_recently_used_sessions_keep_their_agents_running() {
    let answers = json!([{"prompt": [{"message": "hello"}, {"respond": {"stopReason": "end_turn"}}]}]);
    let w = FakeWorld::new(&[("a", answers)]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = w.acp(&p);
    let root = w.agents[0].root.clone();
    let agent = &w.agents[0];
    let running = || -> Vec<i32> {
        agent
            .pids()
            .into_iter()
            .filter(|p| common::fake_agent::running(*p))
            .collect()
    };
    Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut sessions = vec![ed::open(&cx, &root).await?];
            for _ in 1..5 {
                sessions.push(
                    cx.build_session(&root)
                        .block_task()
                        .start_session()
                        .await?
                        .session,
                );
            }
            for (n, session) in sessions.iter_mut().enumerate() {
                let log = ed::turn(session, "Say hello", Answer::Reject, |_| false).await;
                assert_eq!(log.stop_reason.as_deref(), Some("end_turn"), "{n}: {log:?}");
                assert_eq!(agent.pids().len(), n + 1, "an agent per session");
            }
            // After the fifth session's turn, the first session's agent (the least recently
            // used) is stopped; the other four run on.
            let pids = agent.pids();
            common::fake_agent::until(
                "the first session's agent to stop",
                std::time::Duration::from_secs(30),
                || running() == pids[1..],
            )
            .await;
            // Its next prompt starts a new agent; then the second session's is the oldest.
            let log = ed::turn(&mut sessions[0], "Say hello again", Answer::Reject, |_| false).await;
            assert_eq!(log.stop_reason.as_deref(), Some("end_turn"), "{log:?}");
            assert!(log.messages().contains(&"hello".to_owned()), "{log:?}");
            let pids = agent.pids();
            assert_eq!(pids.len(), 6, "a new agent for the first session");
            common::fake_agent::until(
                "the second session's agent to stop",
                std::time::Duration::from_secs(30),
                || running() == [pids[2], pids[3], pids[4], pids[5]],
            )
            .await;
            Ok(())
        })
        .await
        .unwrap();
}

/// `recourse serve` again on `addr` (a restart: same database, same configuration).
fn restart_serve(database: &str, addr: &str, config: &std::path::Path) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"))
        .args(["serve", "--addr", addr, "--config"])
        .arg(config)
        .arg("--database")
        .arg(database)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "the restarted server to answer",
        std::time::Duration::from_secs(60),
        || http(addr, "GET", "/healthz", None).is_some_and(|(s, _)| s == 200),
    );
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_acp_gets_json_rpc_errors_and_the_process_goes_on() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let w = FakeWorld::new(&[("a", json!([{}]))]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = w.acp(&p);
    let mut stdin = acp.child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(acp.child.stdout.take().unwrap()).lines();
    let root = w.agents[0].root.to_str().unwrap().to_owned();
    let secret_looking = "sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH";
    let cases: Vec<(String, Option<i64>)> = vec![
        ("this is not json".to_owned(), Some(-32700)),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": root}}).to_string(), Some(-32600)),
        (json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "one"}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}).to_string(), None),
        (json!({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": secret_looking}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": "/"}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 6, "method": "session/prompt", "params": {"sessionId": "es-nope", "prompt": []}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "session/load", "params": {"sessionId": "../../etc", "cwd": root}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {}}).to_string(), Some(-32601)),
        (json!({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": root}}).to_string(), None),
    ];
    for (line, expected) in cases {
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        let answer = loop {
            let text = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
                .await
                .expect("an answer")
                .unwrap()
                .unwrap_or_else(|| panic!("recourse acp ended on {line}:\n{}", acp.logged()));
            let v: Value = serde_json::from_str(&text).unwrap();
            // Notifications (the session's commands) are not answers.
            if v.get("id").is_some() {
                break v;
            }
        };
        match expected {
            Some(code) => {
                assert_eq!(answer["error"]["code"], code, "{line} -> {answer}");
                assert!(
                    !answer.to_string().contains("Zq8vN2xYpL4mK7rT"),
                    "echoed: {answer}"
                );
            }
            None => assert!(answer["result"].is_object(), "{line} -> {answer}"),
        }
    }
    assert!(acp.child.try_wait().unwrap().is_none(), "still running");
}

#[test]
fn a_refused_token_an_unreachable_server_or_a_profile_out_of_reach_stops_it_at_start_with_a_clear_message() {
    let w = FakeWorld::new(&[("a", json!([{}]))]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let p = runtime.block_on(async { ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]) });
    let run = |server: &str, profile: &str, token: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"));
        c.args(["acp", "--server", server, "--profile", profile, "--config"])
            .arg(&w.config)
            .env_remove("RECOURSE_TOKEN")
            .stdin(std::process::Stdio::null());
        if let Some(t) = token {
            c.env("RECOURSE_TOKEN", t);
        }
        let out = c.output().unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty(), "no ACP traffic");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let server = format!("http://{}", w.addr);
    let token = token_for(&w.addr).unwrap();
    let err = run(&server, &p, None);
    assert!(err.contains("set RECOURSE_TOKEN"), "{err}");
    let err = run(&server, &p, Some("rct_not-a-real-token"));
    assert!(err.contains("refused the API token"), "{err}");
    assert!(
        !err.contains("rct_not-a-real-token"),
        "the token is never shown: {err}"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = run(&format!("http://{closed}"), &p, Some(&token));
    assert!(err.contains("cannot reach the Recourse server"), "{err}");
    let err = run(&server, "pf-nope", Some(&token));
    assert!(err.contains("no profile `pf-nope`"), "{err}");
}
