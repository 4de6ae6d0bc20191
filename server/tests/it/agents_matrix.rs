//! The published agents through Recourse, agent × provider behaviour (issue 28): Claude Code's
//! and Codex's ACP adapters, Gemini CLI and Qwen Code, each a real subprocess pointed at the
//! fake provider (`fake-provider`), against success, an overload, a rate limit with a reset, an
//! exhausted quota or credit, an invalid key, a missing model, a failure in the middle of a
//! stream and a provider that hangs.
//!
//! Each cell runs two routes at once, one per profile, each on an agent entry of its own
//! (its own `HOME`, its own prefix on the provider, so the provider's log tells the routes
//! apart): a profile that switches (the agent, then a standby that succeeds) and one that waits
//! (transient: two retries from 5 s, or a trusted reset up to 5 minutes; hard: a trusted reset
//! up to 5 minutes, else stop). It asserts the classification (code, class, the deadline where
//! the evidence carries one), each route's outcome, that every attempt reached the provider,
//! and that after output or a tool call no prompt is ever sent again (the provider's log does
//! not grow after an hour of route time).
//!
//! Speed: each agent's own retries are set to what README recommends (none: Recourse's policy
//! retries), so most failing cells end after one request instead of the agent's minutes of
//! retrying; Qwen Code still retries a 429 or 5xx for about 80 s in a loop no setting reaches
//! (README), which runs on its own clock made 20 times faster (`scaled-timers.cjs`,
//! [`own_retry_loop`]), and the hang cell gives up after `prompt_idle = 25` on the runners'
//! watchdog clock, which it skips forward once the provider holds both routes' requests. Route
//! time is the manual clock. Agents take real time to start (Gemini CLI and Qwen Code 4 to 7 s on an idle
//! machine, far more on a loaded one), waited for as events, never slept for. `MATRIX |`
//! lines (`--nocapture`) print the table README shows.
//!
//! Without `RECOURSE_AGENTS_DIR` every cell is reported skipped and counted (`requires.rs`)
//! and returns (a failure under `RECOURSE_REQUIRE_AGENTS=1`).

use crate::common;

use common::{
    agents::{self, Published},
    *,
};
use fake_provider::{Fail, FailKind, Reply};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Bound on one route reaching its outcome (agents start slowly on a loaded 2-core machine).
const LIMIT: Duration = Duration::from_secs(240);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Success,
    Overloaded,
    RateLimited,
    Quota,
    InvalidKey,
    MissingModel,
    MidStream,
    Hang,
}

impl Behaviour {
    fn reply(self) -> Reply {
        let fail = |k| Reply::Fail(Fail::new(k));
        match self {
            Behaviour::Success => Reply::Text("Done: the build is fixed.".into()),
            Behaviour::Overloaded => fail(FailKind::Overloaded),
            Behaviour::RateLimited => Reply::Fail(Fail::new(FailKind::RateLimited).reset_in(20)),
            Behaviour::Quota => fail(FailKind::Quota),
            Behaviour::InvalidKey => fail(FailKind::InvalidKey),
            Behaviour::MissingModel => fail(FailKind::MissingModel),
            Behaviour::MidStream => Reply::MidStream("Let me ".into()),
            Behaviour::Hang => Reply::Hang,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Behaviour::Success => "success",
            Behaviour::Overloaded => "overloaded",
            Behaviour::RateLimited => "rate limit, reset in 20 s",
            Behaviour::Quota => "quota / credit",
            Behaviour::InvalidKey => "invalid key",
            Behaviour::MissingModel => "missing model",
            Behaviour::MidStream => "fails mid-stream",
            Behaviour::Hang => "hangs",
        }
    }
}

/// Where a route ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The attempt succeeded (the route is active again, in a new cycle, on this candidate).
    Succeeded,
    /// The failure moved the route to the standby, which succeeded.
    Switched,
    /// `retry_wait`: the same candidate again after the policy's interval.
    Retries,
    /// `waiting_for_reset`: the same candidate again at the trusted reset.
    WaitsForReset,
    /// `action_required`: a person decides.
    StopsForAPerson,
}

/// What a cell must show.
struct Expect {
    code: &'static str,
    class: &'static str,
    /// Seconds from the failure to the deadline the evidence carries (a reset), if any.
    reset_in: Option<i64>,
    switch: Outcome,
    wait: Outcome,
}

fn success() -> Expect {
    Expect {
        code: "",
        class: "",
        reset_in: None,
        switch: Outcome::Succeeded,
        wait: Outcome::Succeeded,
    }
}

/// A classified failure before any output: the switching profile moves on; the waiting one
/// retries (transient) or stops (hard, nothing to wait for), or waits for a reset it was told.
fn failure(code: &'static str, class: &'static str, reset_in: Option<i64>) -> Expect {
    let wait = match (class, reset_in) {
        (_, Some(_)) => Outcome::WaitsForReset,
        ("transient", None) => Outcome::Retries,
        _ => Outcome::StopsForAPerson,
    };
    Expect {
        code,
        class,
        reset_in,
        switch: Outcome::Switched,
        wait,
    }
}

/// Evidence nobody may act on automatically (unclassified, or output was shown): both stop.
fn person(code: &'static str, class: &'static str) -> Expect {
    Expect {
        code,
        class,
        reset_in: None,
        switch: Outcome::StopsForAPerson,
        wait: Outcome::StopsForAPerson,
    }
}

/// What each agent says of each behaviour, and what Recourse must make of it (see the module
/// doc and README's agent section for why each is so).
fn expected(agent: Published, b: Behaviour) -> Expect {
    use Behaviour as B;
    use Published as P;
    match (agent, b) {
        (_, B::Success) => success(),
        // A hang is silence: Recourse calls it hung at `prompt_idle`; nothing to classify, and
        // the prompt was delivered, so a person decides.
        (_, B::Hang) => person("unclassified", "unclassified"),
        // Output was shown before the failure (Claude even ends the turn normally with a
        // fragment): never a silent success, never sent again.
        (_, B::MidStream) => person_after_output(agent),
        // Anthropic's 529 is the provider's overload; OpenAI's and Gemini's 503 say "That model
        // is currently overloaded" / "The model is overloaded": the model's capacity.
        (P::Claude, B::Overloaded) => failure("provider_overloaded", "transient", None),
        (_, B::Overloaded) => failure("model_capacity", "transient", None),
        // Claude relays the body, whose prose names no reset (the headers that do are dropped).
        (P::Claude, B::RateLimited) => failure("rate_limited", "transient", None),
        // Codex drops the body of every 429 ("exceeded retry limit, last status: 429"), and
        // Qwen answers both with its own "Rate limit exceeded. Try again later.": a rate limit
        // and an exhausted quota look the same. See `hidden_429`.
        (P::Codex | P::Qwen, B::RateLimited | B::Quota) => hidden_429(),
        // Gemini passes the provider's prose on: "Please retry in 20.0s."
        (P::Gemini, B::RateLimited) => failure("rate_limited", "transient", Some(20)),
        (_, B::Quota) => failure("quota_limited", "hard", None),
        (_, B::InvalidKey) => failure("auth_required", "hard", None),
        (_, B::MissingModel) => failure("model_unavailable", "hard", None),
    }
}

/// Output before the failure: the classification may be anything. The switching profile stops
/// for a person (the output must not be answered twice elsewhere). The waiting one retries in
/// the very session that holds the output where the agent's entry says its loaded session
/// keeps it (`resume_after_output`: Claude Code; README, "Resumable retries"), so the prompt
/// that goes again is a continuation, which the test checks in the provider's log; elsewhere
/// it stops for a person too (all four advertise `loadSession`, but Codex and Qwen Code load
/// the session without the partial answer).
fn person_after_output(agent: Published) -> Expect {
    Expect {
        code: "*",
        class: "*",
        reset_in: None,
        switch: Outcome::StopsForAPerson,
        wait: match agent.resumes_after_output() {
            true => Outcome::Retries,
            false => Outcome::StopsForAPerson,
        },
    }
}

/// A 429 whose kind the agent hides (Codex, Qwen): a rate limit (transient) without a reset.
/// That is also the safe answer to an exhausted quota: nothing was output, so a retry repeats
/// no work; it is refused again and the budget runs out (the waiting profile then stops, the
/// switching one moves on). Never a wait for a reset nobody gave.
fn hidden_429() -> Expect {
    failure("rate_limited", "transient", None)
}

/// What one route showed.
struct Seen {
    outcome: Outcome,
    snapshot: Value,
    failed: Option<Value>,
    seconds: f64,
}

fn outcome_of(s: &Value) -> Option<Outcome> {
    let state = s["state"].as_str()?;
    // A success starts a new cycle; before its first attempt a route is in cycle 1.
    let idle = s["attempt"].is_null() && s["cycle"].as_u64() >= Some(2);
    Some(match state {
        "active" if idle && s["candidate_id"] == "standby" => Outcome::Switched,
        "active" if idle => Outcome::Succeeded,
        "retry_wait" => Outcome::Retries,
        "waiting_for_reset" => Outcome::WaitsForReset,
        "action_required" => Outcome::StopsForAPerson,
        _ => return None,
    })
}

async fn settle(h: &Harness, route: &str, started: Instant) -> Seen {
    let snapshot = h.wait_route(route, LIMIT, |s| outcome_of(s).is_some()).await;
    let seconds = started.elapsed().as_secs_f64();
    let detail = h.route(route).await;
    let failed = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .cloned();
    Seen {
        outcome: outcome_of(&snapshot).unwrap(),
        snapshot,
        failed,
        seconds,
    }
}

/// Waits until every agent process of this harness is gone (the attempt rows too).
async fn agents_gone(h: &Harness) {
    let mut rows = 1_i64;
    let end = tokio::time::Instant::now() + LIMIT;
    while rows > 0 {
        rows = server::store::sql::query("SELECT COUNT(*) FROM agent_processes")
            .scalar(&h.pool)
            .await
            .unwrap();
        assert!(tokio::time::Instant::now() < end, "agent processes stay");
        if rows > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// How many times sooner the agent's own timers of a second or more fire in the cells where
/// its own retry loop is all that takes time (`scaled-timers.cjs`).
const TIMER_SCALE: u32 = 20;

/// Whether the agent answers this behaviour with a retry loop of its own that no setting turns
/// off: Qwen Code's 7 requests over about 80 s for a 429 or a 5xx (README). The loop runs on
/// the agent's clock, scaled by [`TIMER_SCALE`] (about 4 s): the same requests, the same
/// silence, the same error at the end. A hang is not scaled: there the agent's own timeouts
/// must keep their length, and Recourse's `prompt_idle` decides.
fn own_retry_loop(agent: Published, b: Behaviour) -> bool {
    agent == Published::Qwen
        && matches!(
            b,
            Behaviour::Overloaded | Behaviour::RateLimited | Behaviour::Quota
        )
}

async fn cell(agent: Published, b: Behaviour) {
    let test = format!("agents_matrix::{}::{}", agent.name(), b.name());
    let Some(dir) = agents::dir(&test) else { return };
    agents::set_dummy_keys();
    let provider = agents::provider().await;
    provider.script("switch", vec![b.reply()]);
    provider.script("wait", vec![b.reply()]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("work");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    // A hang is given up after 25 s of silence, on the watchdogs' clock, which the test moves
    // past it once the provider holds both routes' requests (see below); anything else gets the
    // time the agents' own retries take.
    let idle = if b == Behaviour::Hang { 25 } else { 180 };
    let timeouts =
        format!("step = 120\nprompt_idle = {idle}\nprompt_total = 600\ncancel_grace = 5\nexit_grace = 3\n");
    let config: String = ["switch", "wait"]
        .iter()
        .map(|p| {
            agent.toml(
                &dir,
                &format!("{}-{p}", agent.name()),
                &provider.base_url(p),
                &tmp.path().join(format!("home-{p}")),
                &root,
                &timeouts,
                own_retry_loop(agent, b).then_some(TIMER_SCALE),
            )
        })
        .collect();
    let runners = server::config::Runners::new(
        server::config::RunnerConfig::parse(&config).expect("a valid configuration"),
    );
    let watchdog = runners.watchdog();
    let h = Harness::open_with_runners(tempfile::tempdir().unwrap(), t0(), runners).await;
    let acp =
        |p: &str| json!({"id": "agent", "dispatcher": "acp", "runner": format!("{}-{p}", agent.name())});
    let switch = h
        .profile(json!({"name": "switch", "targets": [acp("switch"), sim("standby", "standby", json!([succeed()]))],
            "policy": {"version": 1, "candidates": [
                candidate("agent", disabled(), disabled()),
                candidate("standby", disabled(), disabled())]}}))
        .await;
    let wait = h
        .profile(json!({"name": "wait", "targets": [acp("wait")],
            "policy": {"version": 1, "candidates": [
                candidate("agent", class_policy(2, 5, 300, "stop"), class_policy(0, 0, 300, "stop"))]}}))
        .await;
    let work = json!({"prompt": [{"type": "text", "text": "Fix the build"}], "cwd": root.to_str().unwrap()});
    let started = Instant::now();
    let r_switch = h.start_work(&switch, "inv-switch", work.clone()).await;
    let r_wait = h.start_work(&wait, "inv-wait", work).await;
    if b == Behaviour::Hang {
        // Both agents have sent their prompt to the provider, which will never answer: from
        // here on only silence comes, and `prompt_idle` of it need not be waited out in real
        // time (25 s, twice; an agent that still says something restarts its count).
        let end = Instant::now() + LIMIT;
        while provider.calls("switch").is_empty() || provider.calls("wait").is_empty() {
            assert!(
                Instant::now() < end,
                "{test}: the agents never called the provider"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        watchdog.skip(Duration::from_secs(idle + 1));
    }
    let (a, w) = tokio::join!(settle(&h, &r_switch, started), settle(&h, &r_wait, started));
    agents_gone(&h).await;

    let e = expected(agent, b);
    let c = a
        .failed
        .as_ref()
        .map(|f| f["classification"].clone())
        .unwrap_or(Value::Null);
    let deadline = w.snapshot["deadline"]
        .as_str()
        .map(|d| (chrono::DateTime::parse_from_rfc3339(d).unwrap().to_utc() - h.now()).num_seconds());
    let calls = (provider.calls("switch").len(), provider.calls("wait").len());
    println!(
        "MATRIX | {} | {} | {} | {} | {} | {:?} | {:?} | {:.1} s | {:?} calls | {}",
        agent.name(),
        b.name(),
        c["code"].as_str().unwrap_or("-"),
        c["class"].as_str().unwrap_or("-"),
        deadline.map_or("-".to_owned(), |d| format!("{d} s")),
        a.outcome,
        w.outcome,
        a.seconds.max(w.seconds),
        calls,
        c["classifier_rule"].as_str().unwrap_or("-"),
    );
    // Every attempt reached the provider: the agent was pointed at it and spoke its API.
    assert!(
        calls.0 >= 1 && calls.1 >= 1,
        "{test}: the agent never called the provider: {calls:?}"
    );
    // On the scaled clock the agent's own loop still runs whole: its 7 requests, each route.
    if own_retry_loop(agent, b) {
        assert_eq!(calls, (7, 7), "{test}: the agent's own retry loop");
    }
    if b == Behaviour::Success {
        assert!(
            a.failed.is_none() && w.failed.is_none(),
            "{test}: {:?} {:?}",
            a.failed,
            w.failed
        );
    } else {
        let f = a
            .failed
            .as_ref()
            .unwrap_or_else(|| panic!("{test}: reported a success: {}", a.snapshot));
        if e.code != "*" {
            assert_eq!(c["code"], e.code, "{test}: {f}");
            assert_eq!(c["class"], e.class, "{test}: {f}");
        }
    }
    assert_eq!(a.outcome, e.switch, "{test} (switching profile): {}", a.snapshot);
    assert_eq!(w.outcome, e.wait, "{test} (waiting profile): {}", w.snapshot);
    match e.wait {
        Outcome::WaitsForReset => assert_eq!(deadline, e.reset_in, "{test}: the reset's deadline"),
        Outcome::Retries => assert_eq!(deadline, Some(5), "{test}: the first retry's interval"),
        _ => {}
    }
    // After output (or anything else a person must decide) nothing is sent again: an hour of
    // route time later the provider has seen no other request for the stopped route, which
    // dispatched once. A waiting route's retry fires meanwhile; after output it continues the
    // session that holds the output (its request carries that output).
    if a.outcome == Outcome::StopsForAPerson {
        let g = w.snapshot["generation"].as_u64().unwrap();
        h.advance(3600).await;
        if matches!(w.outcome, Outcome::Retries | Outcome::WaitsForReset) {
            h.wait_route(&r_wait, LIMIT, |s| {
                s["generation"].as_u64() > Some(g + 1) && outcome_of(s).is_some()
            })
            .await;
        }
        agents_gone(&h).await;
        assert_eq!(
            provider.calls("switch").len(),
            calls.0,
            "{test}: a prompt was sent again"
        );
        let route = h.route(&r_switch).await;
        assert_eq!(
            route["dispatches"].as_array().unwrap().len(),
            1,
            "{test}: {route}"
        );
        if b == Behaviour::MidStream && w.outcome == Outcome::Retries {
            let retry = provider.calls("wait");
            let last = retry.last().unwrap();
            assert!(retry.len() > calls.1, "{test}: the resumable retry never ran");
            assert!(
                last.body.to_string().contains("Let me "),
                "{test}: the retry did not continue the session holding the output: {}",
                last.body
            );
        }
    }
    for p in provider.all_received() {
        assert!(
            p.headers.get("host").is_none_or(|h| h.starts_with("127.0.0.1")),
            "{test}: loopback only"
        );
    }
}

macro_rules! matrix {
    ($($agent:ident => [$($name:ident = $b:ident),* $(,)?]),* $(,)?) => {
        $($(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                cell(Published::$agent, Behaviour::$b).await;
            }
        )*)*
    };
}

matrix! {
    Claude => [
        claude_success = Success, claude_overloaded = Overloaded, claude_rate_limited = RateLimited,
        claude_quota = Quota, claude_invalid_key = InvalidKey, claude_missing_model = MissingModel,
        claude_mid_stream = MidStream, claude_hang = Hang,
    ],
    Codex => [
        codex_success = Success, codex_overloaded = Overloaded, codex_rate_limited = RateLimited,
        codex_quota = Quota, codex_invalid_key = InvalidKey, codex_missing_model = MissingModel,
        codex_mid_stream = MidStream, codex_hang = Hang,
    ],
    Gemini => [
        gemini_success = Success, gemini_overloaded = Overloaded, gemini_rate_limited = RateLimited,
        gemini_quota = Quota, gemini_invalid_key = InvalidKey, gemini_missing_model = MissingModel,
        gemini_mid_stream = MidStream, gemini_hang = Hang,
    ],
    Qwen => [
        qwen_success = Success, qwen_overloaded = Overloaded, qwen_rate_limited = RateLimited,
        qwen_quota = Quota, qwen_invalid_key = InvalidKey, qwen_missing_model = MissingModel,
        qwen_mid_stream = MidStream, qwen_hang = Hang,
    ],
}
