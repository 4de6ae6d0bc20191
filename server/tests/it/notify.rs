//! Notifications, in process: rules as part of the profile, the outbox written with the
//! transition that caused it, the in-app list, and deliveries to real webhook receivers (the
//! test's own HTTP servers, which verify every signature): in order per route after the
//! receiver was down, retried with backoff when a receiver fails, hangs or redirects without
//! holding up the others, dead after the last attempt, and never sent to an address the operator
//! did not allow.
//!
//! The engine runs on the harness's manual clock; the delivery worker runs for real
//! (`server::notify::worker::run`), and the tests wait on the receivers' arrivals or on the
//! outbox's rows, never on time. Retries come due when a test moves the clock.

use crate::common;

use axum::http::{Method, StatusCode};
use chrono::TimeDelta;
use common::{
    candidate, class_policy, disabled, overloaded,
    receiver::{Mode, Receiver, SECRET},
    unknown_error, Harness,
};
use serde_json::{json, Value};
use server::engine::Task;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// The configuration of `channels` (webhooks to these receivers), loopback allowed, small
/// backoffs and `attempts` attempts.
fn config(channels: &[(&str, &Receiver)], attempts: u32) -> String {
    let mut text = format!(
        "[notify]\npublic_url = \"https://recourse.example.com\"\nallow_networks = [\"127.0.0.0/8\"]\n\
         max_attempts = {attempts}\nbackoff_initial_ms = 1000\nbackoff_max_ms = 4000\n"
    );
    for (id, r) in channels {
        text.push_str(&format!(
            "\n[[channel]]\nid = \"{id}\"\nkind = \"webhook\"\nurl = \"{}\"\nsecret_env = \"RECOURSE_TEST_WEBHOOK_SECRET\"\ntimeout_seconds = 1\n",
            r.url()
        ));
    }
    text
}

/// A harness with `config` and its delivery worker running.
async fn harness(config: &str) -> Harness {
    let h = quiet_harness(config).await;
    start_worker(&h);
    h
}

/// A harness with `config` whose delivery worker is not started yet.
async fn quiet_harness(config: &str) -> Harness {
    // The secret the channels name, as an operator exports it.
    std::env::set_var("RECOURSE_TEST_WEBHOOK_SECRET", SECRET);
    Harness::with_config(tempfile::tempdir().unwrap(), config).await
}

/// Starts the delivery worker as `recourse serve` does: one of the engine's tasks, ended by its
/// stop.
fn start_worker(h: &Harness) {
    let engine = h.engine.clone();
    h.engine
        .spawn_task(Task::Work, |stop| server::notify::worker::run(engine, stop));
}

/// Waits until no delivery is being attempted (none holds a lease). With the clock still, none
/// is claimed again until the clock moves: a test that moves it next knows what comes due.
/// (The manual clock jumps; a real one never outruns a lease, which outlasts every attempt.)
async fn idle(h: &Harness) {
    let end = tokio::time::Instant::now() + LIMIT;
    loop {
        let leased: i64 =
            server::store::sql::query("SELECT COUNT(*) FROM notify_deliveries WHERE lease_owner IS NOT NULL")
                .scalar(&h.pool)
                .await
                .unwrap();
        if leased == 0 {
            return;
        }
        assert!(tokio::time::Instant::now() < end, "deliveries stayed leased");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A profile on one external candidate `main` (provider `anthropic`) that retries transient
/// errors `retries` times after 5 s then stops, with these notification rules.
async fn profile(h: &Harness, retries: u32, rules: Value) -> String {
    h.profile(json!({"name": "told", "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
        "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(retries, 5, 0, "stop"), disabled())]},
        "notifications": rules}))
        .await
}

async fn evidence(h: &Harness, route: &str, mut env: Value) -> Value {
    env["generation"] = h.snapshot(route).await["generation"].clone();
    let (status, out) = h.post(&format!("/api/v1/routes/{route}/evidence"), env).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    out["snapshot"].clone()
}

/// Moves the clock and wakes the worker, so retries that came due are sent.
fn advance(h: &Harness, seconds: i64) {
    h.clock.advance(TimeDelta::seconds(seconds));
    h.engine.outbox_signal().notify_one();
}

async fn deliveries(h: &Harness, query: &str) -> Vec<Value> {
    h.get(&format!("/api/v1/notifications/deliveries?{query}"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// Waits until the deliveries satisfy `done`, looking again every 20 ms (the worker settles
/// them on its own time); panics after [`LIMIT`].
async fn wait_deliveries(h: &Harness, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let end = tokio::time::Instant::now() + LIMIT;
    loop {
        let rows = deliveries(h, "limit=200").await;
        if done(&rows) {
            return rows;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "deliveries never got there: {rows:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn rules_naming_a_channel_the_server_does_not_have_are_refused_at_their_path() {
    let h = harness("").await;
    let (status, v) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "x", "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]},
                   "notifications": [{"events": ["route.needs_person"], "channels": ["in_app", "pager"]},
                                     {"events": [], "channels": ["in_app"]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let paths: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"notifications[1].events"), "{v}");
    // The shape is checked first; the channels once the shape is right.
    let (status, v) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "x", "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]},
                   "notifications": [{"events": ["route.needs_person"], "channels": ["in_app", "pager"]}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["errors"][0]["path"], "notifications[0].channels[1]", "{v}");
    assert!(!v.to_string().contains("secret"), "{v}");
}

#[tokio::test]
async fn rules_are_part_of_the_profile_revision_and_of_its_audited_diff() {
    let h = harness("").await;
    let p = profile(&h, 0, json!([])).await;
    let rules = json!([{"events": ["route.waiting", "route.needs_person"], "channels": ["in_app"], "min_wait_seconds": 600},
                       {"events": ["route.finished"], "channels": ["in_app"], "min_wait_seconds": 99}]);
    let (status, v) = h
        .call(
            Method::PUT,
            &format!("/api/v1/profiles/{p}"),
            Some(json!({"name": "told", "targets": [{"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
                "policy": {"version": 1, "candidates": [candidate("main", class_policy(0, 5, 0, "stop"), disabled())]},
                "notifications": rules, "expected_revision": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["revision"], 2);
    assert_eq!(v["notifications"][0]["min_wait_seconds"], 600);
    assert_eq!(
        v["notifications"][1]["min_wait_seconds"], 0,
        "normalized: no route.waiting, no minimum"
    );
    let stored: String = server::store::sql::query(
        "SELECT notifications_json FROM profile_revisions WHERE profile_id = ? AND revision = 2",
    )
    .bind(p.as_str())
    .scalar(&h.pool)
    .await
    .unwrap();
    assert!(stored.contains("route.needs_person"), "{stored}");
    let audit = h.get("/api/v1/audit?limit=5").await;
    let update = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "profile.update")
        .expect("the edit is audited");
    assert!(
        update["detail"].to_string().contains("notifications"),
        "the diff shows the rules: {update}"
    );
}

#[tokio::test]
async fn a_route_that_stops_for_a_person_is_in_the_in_app_list_from_the_same_commit() {
    let h = harness("").await;
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person", "route.finished"], "channels": ["in_app"]}]),
    )
    .await;
    let r = h.start(&p, "inv-1").await;
    let empty = h.get("/api/v1/notifications").await;
    assert_eq!(empty["unread"], 0, "a start tells nothing: {empty}");
    // Unknown evidence stops the route for a person: the answer already sees the notification.
    let s = evidence(&h, &r, unknown_error()).await;
    assert_eq!(s["state"], "action_required");
    let page = h.get("/api/v1/notifications").await;
    assert_eq!(page["unread"], 1, "{page}");
    let n = &page["items"][0];
    assert_eq!(n["type"], "route.needs_person");
    assert_eq!(n["route_id"], r.as_str());
    assert!(n["summary"].as_str().unwrap().contains("unclassified"), "{n}");
    assert!(
        !n.to_string().contains("frobnicator") && !n.to_string().contains("sk-ant"),
        "no evidence text: {n}"
    );
    // Read, then a new one is unread again.
    let (status, _) = h
        .post("/api/v1/notifications/read", json!({"through_seq": n["seq"]}))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(h.get("/api/v1/notifications").await["unread"], 0);
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, _) = h
        .post(
            &format!("/api/v1/routes/{r}/abandon"),
            json!({"expected_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let page = h.get("/api/v1/notifications").await;
    assert_eq!(page["unread"], 1);
    assert_eq!(page["items"][0]["type"], "route.finished");
    assert_eq!(page["items"][1]["read"], true);
    // A `seq` past the databases' integers is refused, named, and marks nothing.
    let (status, out) = h
        .post(
            "/api/v1/notifications/read",
            json!({"through_seq": policy::limits::MAX_NOTIFICATION_SEQ + 1}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert!(out.to_string().contains("through_seq"), "{out}");
    assert_eq!(h.get("/api/v1/notifications").await["unread"], 1);
}

#[tokio::test]
async fn webhooks_are_signed_and_a_routes_events_arrive_in_order_after_the_receiver_was_down() {
    // The receiver is down: nothing listens on its port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let placeholder = Receiver::start_on(port, Mode::Accept).await;
    placeholder.stop();
    // The worker starts once the route's story is told (the manual clock jumps meanwhile).
    let h = quiet_harness(&config(&[("ops", &placeholder)], 20)).await;
    let rules = json!([{"events": ["route.waiting", "route.needs_person", "circuit.opened", "circuit.closed",
                                   "route.finished"], "channels": ["ops", "in_app"]}]);
    let p = profile(&h, 1, rules).await;
    let r = h.start(&p, "inv-1").await;
    // Overloaded: a retry wait (route.waiting) and the provider's circuit opens.
    let s = evidence(&h, &r, overloaded()).await;
    assert_eq!(s["state"], "retry_wait");
    // The retry fails again: the policy stops (route.needs_person).
    h.advance(5).await;
    let s = evidence(&h, &r, overloaded()).await;
    assert_eq!(s["state"], "action_required", "{s}");
    // Once the circuit's backoff has passed, a person retries and it succeeds (the circuit
    // closes), then the caller completes.
    h.advance(600).await;
    let g = s["generation"].clone();
    let (status, _) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "retry_now", "expected_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, v) = h
        .post(
            &format!("/api/v1/routes/{r}/result"),
            json!({"invocation_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, _) = h
        .post(
            &format!("/api/v1/routes/{r}/complete"),
            json!({"expected_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Attempts fail while the receiver is down; only the route's first event is tried (the
    // rest wait behind it, in order).
    start_worker(&h);
    let rows = wait_deliveries(&h, |rows| rows.iter().any(|d| d["attempts"].as_u64() >= Some(1))).await;
    let tried: Vec<_> = rows.iter().filter(|d| d["attempts"] != 0).collect();
    assert_eq!(tried.len(), 1, "only the head of the route's queue: {rows:#?}");
    assert!(
        tried[0]["last_error"].as_str().unwrap().contains("connect"),
        "{rows:#?}"
    );
    idle(&h).await;
    advance(&h, 2);
    wait_deliveries(&h, |rows| rows.iter().any(|d| d["attempts"].as_u64() >= Some(2))).await;

    // The receiver comes back; the next retry delivers everything, in order.
    idle(&h).await;
    let receiver = Receiver::start_on(port, Mode::Accept).await;
    advance(&h, 10);
    let accepted = receiver
        .wait_accepted(LIMIT, |a| a.iter().any(|d| d.body["type"] == "route.finished"))
        .await;
    let types: Vec<&str> = accepted
        .iter()
        .map(|d| d.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "route.waiting",
            "circuit.opened",
            "route.needs_person",
            "circuit.closed",
            "route.finished"
        ],
        "every event, in the order it happened"
    );
    for d in &accepted {
        assert!(d.signature_ok, "a valid Standard Webhooks signature: {d:?}");
        assert_eq!(
            d.id,
            d.body["data"]["id"].as_str().unwrap(),
            "webhook-id is the event's id"
        );
        assert_eq!(d.body["data"]["route_id"], r.as_str());
        assert_eq!(
            d.body["data"]["link"],
            format!("https://recourse.example.com/routes/{r}").as_str()
        );
        assert_eq!(d.body["data"]["profile_id"], p.as_str());
        assert_eq!(d.body["data"]["caller"]["invocation_id"], "inv-1");
        assert!(!d.raw.contains("Overloaded"), "no evidence text: {}", d.raw);
    }
    assert_eq!(accepted[0].body["data"]["wait"], "retry");
    assert_eq!(accepted[1].body["data"]["circuit"], "provider:anthropic");
    assert_eq!(accepted[2].body["data"]["reason"], "policy_stop");
    assert_eq!(accepted[2].body["data"]["code"], "provider_overloaded");
    assert_eq!(accepted[4].body["data"]["state"], "completed");
    let rows = wait_deliveries(&h, |rows| rows.iter().all(|d| d["status"] == "delivered")).await;
    assert_eq!(rows.len(), 5);
    let metrics = h.call(Method::GET, "/metrics", None).await.1;
    let text = metrics.as_str().unwrap();
    assert!(
        text.contains("recourse_notifications_total{outcome=\"delivered\"} 5"),
        "{text}"
    );
    assert!(
        text.contains("recourse_notification_deliveries{status=\"pending\"} 0"),
        "{text}"
    );
}

#[tokio::test]
async fn receivers_that_fail_hang_or_redirect_are_retried_never_stall_the_others_and_end_dead() {
    let ok = Receiver::start(Mode::Accept).await;
    let failing = Receiver::start(Mode::Status(500)).await;
    let hanging = Receiver::start(Mode::Hang).await;
    let redirecting = Receiver::start(Mode::Redirect).await;
    let h = harness(&config(
        &[
            ("ok", &ok),
            ("failing", &failing),
            ("hanging", &hanging),
            ("redirecting", &redirecting),
        ],
        3,
    ))
    .await;
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person"], "channels": ["hanging", "failing", "redirecting", "ok"]}]),
    )
    .await;
    let r = h.start(&p, "inv-1").await;
    let mut hangs = hanging.arrivals.subscribe();
    evidence(&h, &r, unknown_error()).await;
    // The hanging receiver holds its request; the healthy one is served meanwhile.
    tokio::time::timeout(LIMIT, hangs.recv()).await.unwrap().unwrap();
    let got = ok.wait_accepted(LIMIT, |a| a.len() == 1).await;
    assert!(got[0].signature_ok);
    let rows = deliveries(&h, "").await;
    let hung = rows.iter().find(|d| d["channel_id"] == "hanging").unwrap();
    assert_eq!(
        (hung["status"].as_str(), hung["attempts"].as_u64()),
        (Some("pending"), Some(0)),
        "the healthy receiver got its event while the other attempt still hung: {rows:#?}"
    );
    // Each failure is tried again after its backoff, and dead after the third attempt.
    for n in 1..=3u64 {
        wait_deliveries(&h, |rows| {
            rows.iter()
                .filter(|d| d["channel_id"] != "ok")
                .all(|d| d["attempts"].as_u64() >= Some(n))
        })
        .await;
        idle(&h).await;
        advance(&h, 60);
    }
    let rows = wait_deliveries(&h, |rows| {
        rows.iter()
            .filter(|d| d["channel_id"] != "ok")
            .all(|d| d["status"] == "dead")
    })
    .await;
    for d in rows.iter().filter(|d| d["channel_id"] != "ok") {
        assert_eq!(d["attempts"], 3, "{d}");
    }
    let error = |channel: &str| {
        rows.iter()
            .find(|d| d["channel_id"] == channel)
            .map(|d| d["last_error"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert!(error("failing").contains("500"));
    assert!(error("hanging").contains("timeout"));
    assert!(error("redirecting").contains("redirect"));
    assert_eq!(failing.seen().len(), 3);
    assert_eq!(redirecting.seen().len(), 3, "redirects are never followed");
    let dead = deliveries(&h, "status=dead").await;
    assert_eq!(dead.len(), 3);
    let metrics = h.call(Method::GET, "/metrics", None).await.1;
    let text = metrics.as_str().unwrap();
    assert!(
        text.contains("recourse_notification_deliveries{status=\"dead\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("recourse_notifications_total{outcome=\"dead\"} 3"),
        "{text}"
    );
}

#[tokio::test]
async fn receivers_on_addresses_the_operator_did_not_allow_get_no_request() {
    let receiver = Receiver::start(Mode::Accept).await;
    std::env::set_var("RECOURSE_TEST_WEBHOOK_SECRET", SECRET);
    // `localhost` resolves to loopback, which is not allowed here; the metadata address is
    // never allowed by default.
    let config = format!(
        "[notify]\nmax_attempts = 2\nbackoff_initial_ms = 1000\n\
         [[channel]]\nid = \"local\"\nkind = \"webhook\"\nurl = \"http://localhost:{}/hook\"\nsecret_env = \"RECOURSE_TEST_WEBHOOK_SECRET\"\n\
         [[channel]]\nid = \"metadata\"\nkind = \"webhook\"\nurl = \"http://169.254.169.254/latest/meta-data\"\nsecret_env = \"RECOURSE_TEST_WEBHOOK_SECRET\"\n",
        receiver.addr.port()
    );
    let h = harness(&config).await;
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person"], "channels": ["local", "metadata"]}]),
    )
    .await;
    let r = h.start(&p, "inv-1").await;
    evidence(&h, &r, unknown_error()).await;
    let rows = wait_deliveries(&h, |rows| {
        rows.len() == 2 && rows.iter().all(|d| d["attempts"] == 1)
    })
    .await;
    for d in &rows {
        assert!(
            d["last_error"].as_str().unwrap().contains("not public"),
            "refused before any request: {d}"
        );
    }
    assert!(
        receiver.seen().is_empty(),
        "no request reached the loopback receiver"
    );
}

#[tokio::test]
async fn the_engines_stop_waits_for_the_delivery_being_sent_and_settles_it_before_the_writer_ends() {
    let gated = Receiver::start(Mode::Gated).await;
    let h = quiet_harness(&config(&[("gated", &gated)], 3)).await;
    start_worker(&h);
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person"], "channels": ["gated"]}]),
    )
    .await;
    let r = h.start(&p, "inv-1").await;
    let mut arrivals = gated.arrivals.subscribe();
    evidence(&h, &r, unknown_error()).await;
    // The receiver holds the request: the attempt is in flight when the stop comes.
    tokio::time::timeout(LIMIT, arrivals.recv())
        .await
        .unwrap()
        .unwrap();
    let engine = h.engine.clone();
    let stopping = tokio::spawn(async move { engine.shutdown().await });
    // The test runs on one thread: yielding lets the stop reach the worker.
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
    assert!(
        !stopping.is_finished(),
        "the engine stopped while the worker's attempt was still waiting for its answer"
    );
    gated.open_gate();
    tokio::time::timeout(LIMIT, stopping).await.unwrap().unwrap();
    // Settled through the writer before it ended: not left leased, to be sent again after the
    // stop.
    let rows = deliveries(&h, "").await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(
        (rows[0]["status"].as_str(), rows[0]["attempts"].as_u64()),
        (Some("delivered"), Some(1)),
        "{rows:#?}"
    );
    assert_eq!(gated.accepted().len(), 1);
}

// Steps delivered together (`submit_all`, as the scheduler does) share one group commit, and
// with it the statements that write their notifications: the events must still take their
// `seq` in the order the steps ran, each with one pending delivery per channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_one_group_commit_keep_the_steps_order_and_each_has_a_delivery_per_channel() {
    let r = Receiver::start(Mode::Accept).await;
    // Four channels: more than one statement's worth on PostgreSQL (three a statement).
    let h = quiet_harness(&config(&[("a", &r), ("b", &r), ("c", &r), ("d", &r)], 3)).await;
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person"], "channels": ["in_app", "a", "b", "c", "d"]}]),
    )
    .await;
    let mut routes = Vec::new();
    for i in 0..6 {
        routes.push(h.start(&p, &format!("inv-{i}")).await);
    }
    let mut inputs = Vec::new();
    for route in &routes {
        let mut env = unknown_error();
        env["generation"] = h.snapshot(route).await["generation"].clone();
        let envelope = classifier::Envelope::from_value(&env).unwrap().into_owned();
        inputs.push((route.clone(), server::engine::Input::evidence(envelope)));
    }
    let before = h.engine.write_stats();
    for result in h.engine.submit_all(inputs).await {
        assert_eq!(result.unwrap().snapshot.state.as_str(), "action_required");
    }
    let after = h.engine.write_stats();
    assert_eq!(
        after.group_commits - before.group_commits,
        1,
        "{before:?} {after:?}"
    );

    let events = server::store::sql::query(
        "SELECT seq, id, route_id, type, in_app, created_ms FROM notify_events ORDER BY seq",
    )
    .fetch_all(&h.pool)
    .await
    .unwrap();
    let order: Vec<String> = events.iter().map(|e| e.try_get("route_id").unwrap()).collect();
    assert_eq!(order, routes, "one event per route, in the order the steps ran");
    let deliveries = server::store::sql::query(
        "SELECT event_seq, channel_id, route_id, status, attempts, due_ms FROM notify_deliveries",
    )
    .fetch_all(&h.pool)
    .await
    .unwrap();
    assert_eq!(deliveries.len(), 6 * 4);
    for e in &events {
        let seq: i64 = e.try_get("seq").unwrap();
        let route: String = e.try_get("route_id").unwrap();
        let kind: String = e.try_get("type").unwrap();
        let in_app: i64 = e.try_get("in_app").unwrap();
        let created: i64 = e.try_get("created_ms").unwrap();
        assert_eq!(kind, "route.needs_person");
        assert_eq!(in_app, 1, "in_app is a column, not a delivery");
        let mut channels: Vec<String> = deliveries
            .iter()
            .filter(|d| d.try_get::<i64, _>("event_seq").unwrap() == seq)
            .map(|d| {
                assert_eq!(d.try_get::<String, _>("route_id").unwrap(), route);
                assert_eq!(d.try_get::<String, _>("status").unwrap(), "pending");
                assert_eq!(d.try_get::<i64, _>("attempts").unwrap(), 0);
                assert_eq!(
                    d.try_get::<i64, _>("due_ms").unwrap(),
                    created,
                    "due when written"
                );
                d.try_get("channel_id").unwrap()
            })
            .collect();
        channels.sort();
        assert_eq!(channels, ["a", "b", "c", "d"], "event {seq}");
    }
    // The in-app list has all six, and a worker started now sends every delivery once.
    assert_eq!(h.get("/api/v1/notifications").await["unread"], 6);
    start_worker(&h);
    let rows = wait_deliveries(&h, |rows| {
        rows.len() == 24 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(rows.len(), 24);
    assert_eq!(r.accepted().len(), 24, "each delivery sent once");
}

/// The worker's writes, driven by hand: a lease that ran out is taken over by the next claim,
/// the first holder's settlements then write nothing and come back as lost, and the new
/// holder's write each outcome (delivered, tried again later, dead) to its own delivery.
#[tokio::test]
async fn a_settlement_under_a_lease_another_claim_took_over_writes_nothing() {
    use server::engine::deliveries::DeliveryClaim;
    use server::store::notify::{Settle, Settlement};

    let r = Receiver::start(Mode::Accept).await;
    let h = quiet_harness(&config(&[("a", &r), ("b", &r), ("c", &r)], 3)).await;
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person"], "channels": ["a", "b", "c"]}]),
    )
    .await;
    let route = h.start(&p, "inv-lease").await;
    evidence(&h, &route, unknown_error()).await;
    let claim = |token: &str| {
        let claim = DeliveryClaim {
            token: token.to_owned(),
            lease: TimeDelta::seconds(10),
            limit: 10,
        };
        let engine = h.engine.clone();
        async move { engine.write_deliveries(Vec::new(), Some(claim)).await.unwrap() }
    };
    let first = claim("lease-a").await;
    assert_eq!(first.claimed.len(), 3);
    // Still leased: nothing more to claim.
    let none = claim("lease-x").await;
    assert!(none.claimed.is_empty(), "{:?}", none.claimed);
    // The lease runs out; another claim takes the three over.
    h.clock.advance(TimeDelta::seconds(11));
    let second = claim("lease-b").await;
    assert_eq!(second.claimed.len(), 3);

    let at = h.engine.now();
    let settle = |claimed: &[server::store::notify::Claimed], token: &str| -> Vec<Settlement> {
        claimed
            .iter()
            .map(|c| Settlement {
                claimed: c.clone(),
                token: token.to_owned(),
                settle: match c.channel_id.as_str() {
                    "a" => Settle::Delivered,
                    "b" => Settle::Retry {
                        due_ms: at.timestamp_millis() + 60_000,
                        error: "receiver answered 503".to_owned(),
                    },
                    _ => Settle::Dead {
                        error: "receiver answered 410".to_owned(),
                    },
                },
                at,
            })
            .collect()
    };
    let stale = h
        .engine
        .write_deliveries(settle(&first.claimed, "lease-a"), None)
        .await
        .unwrap();
    let mut lost = stale.lost.clone();
    lost.sort();
    let seq = first.claimed[0].event_seq;
    assert_eq!(
        lost,
        [
            ("a".to_owned(), seq),
            ("b".to_owned(), seq),
            ("c".to_owned(), seq)
        ]
    );
    let rows = |h: &Harness| {
        let pool = h.pool.clone();
        async move {
            server::store::sql::query(
                "SELECT channel_id, status, attempts, due_ms, lease_owner, last_error, settled_at \
                 FROM notify_deliveries ORDER BY channel_id",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d.try_get::<String, _>("channel_id").unwrap(),
                    d.try_get::<String, _>("status").unwrap(),
                    d.try_get::<i64, _>("attempts").unwrap(),
                    d.try_get::<i64, _>("due_ms").unwrap(),
                    d.try_get::<Option<String>, _>("lease_owner").unwrap(),
                    d.try_get::<Option<String>, _>("last_error").unwrap(),
                    d.try_get::<Option<String>, _>("settled_at").unwrap().is_some(),
                )
            })
            .collect::<Vec<_>>()
        }
    };
    for (channel, status, attempts, _, owner, error, settled) in rows(&h).await {
        assert_eq!(
            (status.as_str(), attempts, owner.as_deref(), error, settled),
            ("pending", 0, Some("lease-b"), None, false),
            "{channel}: the stale settlement wrote nothing"
        );
    }

    let written = h
        .engine
        .write_deliveries(settle(&second.claimed, "lease-b"), None)
        .await
        .unwrap();
    assert!(written.lost.is_empty(), "{:?}", written.lost);
    let due_before = first.claimed[0].created_ms;
    let after = rows(&h).await;
    assert_eq!(
        after,
        [
            (
                "a".to_owned(),
                "delivered".to_owned(),
                1,
                due_before,
                None,
                None,
                true
            ),
            (
                "b".to_owned(),
                "pending".to_owned(),
                1,
                at.timestamp_millis() + 60_000,
                None,
                Some("receiver answered 503".to_owned()),
                false
            ),
            (
                "c".to_owned(),
                "dead".to_owned(),
                1,
                due_before,
                None,
                Some("receiver answered 410".to_owned()),
                true
            ),
        ]
    );
}

/// Retention (`[notify] keep_days`): an event older than it whose deliveries are all settled
/// (delivered or dead) is removed with its deliveries, and leaves the in-app list; one with a
/// delivery still pending stays however old, until that delivery is settled; a newer one stays.
/// The delivery worker prunes on its own at its start and every hour of the engine's clock.
#[tokio::test]
async fn events_past_the_retention_with_nothing_left_to_send_are_removed_never_a_pending_one() {
    use server::engine::deliveries::DeliveryClaim;
    use server::store::notify::{Settle, Settlement};

    let r = Receiver::start(Mode::Accept).await;
    let text = config(&[("a", &r), ("b", &r)], 3).replacen(
        "backoff_max_ms = 4000\n",
        "backoff_max_ms = 4000\nkeep_days = 2\n",
        1,
    );
    let h = quiet_harness(&text).await;
    let p = profile(
        &h,
        0,
        json!([{"events": ["route.needs_person"], "channels": ["a", "b", "in_app"]}]),
    )
    .await;
    let old_settled = h.start(&p, "inv-old-settled").await;
    evidence(&h, &old_settled, unknown_error()).await;
    let old_pending = h.start(&p, "inv-old-pending").await;
    evidence(&h, &old_pending, unknown_error()).await;

    // The four deliveries are claimed; the first event's are settled (delivered, dead), the
    // second's one delivered and one to be tried again.
    let claimed = h
        .engine
        .write_deliveries(
            Vec::new(),
            Some(DeliveryClaim {
                token: "lease-r".to_owned(),
                lease: TimeDelta::seconds(10),
                limit: 10,
            }),
        )
        .await
        .unwrap()
        .claimed;
    assert_eq!(claimed.len(), 4, "{claimed:?}");
    let first = claimed.iter().map(|c| c.event_seq).min().unwrap();
    let at = h.engine.now();
    let settlements = claimed
        .iter()
        .map(|c| Settlement {
            claimed: c.clone(),
            token: "lease-r".to_owned(),
            settle: match (c.event_seq == first, c.channel_id.as_str()) {
                (true, "a") | (false, "a") => Settle::Delivered,
                (true, _) => Settle::Dead {
                    error: "receiver answered 410".to_owned(),
                },
                (false, _) => Settle::Retry {
                    due_ms: at.timestamp_millis() + 60_000,
                    error: "receiver answered 503".to_owned(),
                },
            },
            at,
        })
        .collect();
    let written = h.engine.write_deliveries(settlements, None).await.unwrap();
    assert!(written.lost.is_empty(), "{:?}", written.lost);

    // Three days later, a third route stops for a person.
    h.clock.advance(TimeDelta::days(3));
    let new = h.start(&p, "inv-new").await;
    evidence(&h, &new, unknown_error()).await;

    const EVENTS: &str = "SELECT route_id FROM notify_events ORDER BY seq";
    const DELIVERIES: &str = "SELECT e.route_id FROM notify_deliveries d \
        JOIN notify_events e ON e.seq = d.event_seq ORDER BY d.event_seq, d.channel_id";
    let orphans = |h: &Harness| {
        let pool = h.pool.clone();
        async move {
            server::store::sql::query(
                "SELECT COUNT(*) FROM notify_deliveries d WHERE NOT EXISTS \
                 (SELECT 1 FROM notify_events e WHERE e.seq = d.event_seq)",
            )
            .scalar::<i64>(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(
        in_app(&h).await,
        [new.clone(), old_pending.clone(), old_settled.clone()]
    );

    let before = (h.engine.now() - TimeDelta::days(2)).timestamp_millis();
    let removed = h.engine.store().prune_notifications(before, 500).await.unwrap();
    assert_eq!(removed, 1, "only the old event with nothing left to send");
    assert_eq!(route_ids(&h, EVENTS).await, [old_pending.clone(), new.clone()]);
    assert_eq!(
        route_ids(&h, DELIVERIES).await,
        [old_pending.clone(), old_pending.clone(), new.clone(), new.clone()],
    );
    assert_eq!(
        orphans(&h).await,
        0,
        "the removed event's deliveries went with it"
    );
    assert_eq!(in_app(&h).await, [new.clone(), old_pending.clone()]);
    // Nothing else is old enough and settled: a second pass removes nothing.
    assert_eq!(
        h.engine.store().prune_notifications(before, 500).await.unwrap(),
        0
    );

    // The worker sends what is left (the retry and the new event's two deliveries)...
    start_worker(&h);
    let rows = wait_deliveries(&h, |rows| {
        rows.len() == 4 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(rows.len(), 4, "{rows:#?}");
    idle(&h).await;
    // ... and an hour later removes the old event it settled, keeping the new one.
    advance(&h, 3_601);
    let end = tokio::time::Instant::now() + LIMIT;
    while route_ids(&h, EVENTS).await != [new.clone()] {
        assert!(
            tokio::time::Instant::now() < end,
            "the worker never removed the old event: {:?}",
            route_ids(&h, EVENTS).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(route_ids(&h, DELIVERIES).await, [new.clone(), new.clone()]);
    assert_eq!(orphans(&h).await, 0);
    assert_eq!(in_app(&h).await, [new]);
    // The worker counts what it removed (the first removal above was the test's own call).
    let metrics = h.call(Method::GET, "/metrics", None).await.1;
    let text = metrics.as_str().unwrap();
    assert!(
        text.contains("recourse_notification_events_removed_total 1\n"),
        "{text}"
    );
}

/// The route ids `sql` (one text column) reads, in its order.
async fn route_ids(h: &Harness, sql: &'static str) -> Vec<String> {
    server::store::sql::query(sql)
        .scalars::<String>(&h.pool)
        .await
        .unwrap()
}

/// The routes of the in-app list, newest first.
async fn in_app(h: &Harness) -> Vec<String> {
    h.get("/api/v1/notifications").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["route_id"].as_str().unwrap().to_owned())
        .collect()
}
