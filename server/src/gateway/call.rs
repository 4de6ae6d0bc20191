//! One held call: from the parsed request to the end of its answer.
//!
//! 1. The profile its `model` names must serve the call's style; the token gets a [`Slot`].
//! 2. It listens to its route's attempts (`LiveCalls::listen`, under a fresh invocation id) and
//!    to the engine's route events, then starts the route (caller `utility`, the request as its
//!    work). The route runs as any other: the dispatcher launches, reports, and the policy and
//!    the gate decide retries, waits and switches.
//! 3. It holds while `policy::gateway::judge` says so, on every snapshot of its route, and
//!    answers as soon as an attempt's answer reaches it (a whole body, or a stream from its
//!    first content event, passed through as it arrives) or the judge answers an error.
//! 4. A success whose answer reached the call completes the route in the success's own commit
//!    (the http dispatcher reports both: `Input::Finish`; a utility call is one prompt). After
//!    an error answer the route keeps its state, for a person or for itself.
//!    A client that goes away before its answer ended abandons the route ([`Leave`]), which
//!    cancels the running attempt.
//!
//! Nothing here sleeps on the engine's clock: waits end through route events. The one bound in
//! real time is `MAX_GATEWAY_CALL_SECONDS` on the whole call.

use super::{
    check_profile, profile_named,
    reply::{self, RouteHeaders},
    slots::{Slot, Slots},
};
use crate::{
    auth::{Actor, Principal, Via},
    engine::{
        dispatch::http::{Asking, Live, Registration},
        Engine, EngineError, Input, RouteStreamEvent, StartOptions,
    },
    state::AppState,
};
use axum::{
    body::Bytes,
    http::{HeaderMap, HeaderName},
    response::Response,
};
use chrono::{DateTime, TimeDelta, Utc};
use policy::{
    gateway::{self, ErrorKind, GatewayError, GatewayRequest, Next, Style},
    limits::{MAX_GATEWAY_CALLS_PER_TOKEN, MAX_GATEWAY_CALL_SECONDS},
    route::{DispatchState, RouteEvent, StateName},
    wire::RouteSnapshot,
};
use std::{sync::Arc, time::Duration};
use tokio::{
    sync::{broadcast, broadcast::error::RecvError, mpsc},
    time::Instant,
};

/// Client headers passed on to the provider, per style (only what changes what the provider
/// accepts: Claude Code's request bodies use beta features).
const PASSED: &[(Style, &str)] = &[(Style::Anthropic, "anthropic-beta")];

/// Serves one parsed request of `style`.
pub(super) async fn hold(
    s: &AppState,
    slots: &Slots,
    p: &Principal,
    actor: Actor,
    style: Style,
    headers: &HeaderMap,
    request: GatewayRequest,
) -> Response {
    let max_wait = match gateway::max_wait(headers.get("x-recourse-max-wait").map(|v| v.as_bytes())) {
        Ok(w) => w,
        Err(e) => return reply::error(style, &e, None),
    };
    let profile = match profile_named(&s.engine, p, request.model()).await {
        Ok(profile) => profile,
        Err(e) => return reply::error(style, &e, None),
    };
    if let Err(e) = check_profile(style, &profile, &s.engine.runners().current()) {
        return reply::error(style, &e, None);
    }
    let key = match &p.via {
        Via::Token { id, .. } => id.as_str(),
        Via::Session => p.account_id.as_str(),
    };
    let Some(slot) = slots.take(key, MAX_GATEWAY_CALLS_PER_TOKEN) else {
        let mut e = GatewayError::new(
            ErrorKind::RateLimited,
            format!("This token has {MAX_GATEWAY_CALLS_PER_TOKEN} gateway calls open already; try again when one ends."),
        );
        e.retry_after = Some(1);
        return reply::error(style, &e, None);
    };
    let invocation_id = match invocation_id() {
        Some(id) => id,
        None => {
            let e = GatewayError::new(
                ErrorKind::Unavailable,
                "No random number for the call's id; try again.",
            );
            return reply::error(style, &e, None);
        }
    };
    let asking = Asking {
        stream: request.stream(),
        stream_options: request.stream_options().cloned(),
        headers: PASSED
            .iter()
            .filter(|(st, _)| *st == style)
            .filter_map(|(_, name)| {
                let name = HeaderName::from_static(name);
                headers.get(&name).map(|v| (name, v.clone()))
            })
            .collect(),
    };
    let engine = s.engine.clone();
    let (registration, live) = engine.live_calls().listen(&invocation_id, asking);
    // Subscribed before the start: no change of the route can come before it.
    let events = engine.subscribe();
    let give_up_at = engine.now() + TimeDelta::seconds(i64::try_from(max_wait).unwrap_or(i64::MAX));
    let start = request.into_start(&profile.id, &invocation_id, style);
    // Audited as every route start is, in the start's own transaction.
    let options = StartOptions {
        by: Some(actor.to_audit()),
        profile: Some(profile),
    };
    let summary = match engine.start(start, options).await {
        Ok(summary) => summary,
        Err(e) => return reply::error(style, &reply::engine_error(e), None),
    };
    let mut call = Call {
        leave: Leave {
            engine: engine.clone(),
            route_id: summary.id.clone(),
            armed: true,
        },
        engine,
        style,
        route_id: summary.id,
        latest: summary.snapshot.clone(),
        attempts: 0,
        give_up_at,
        ends_at: Instant::now() + Duration::from_secs(MAX_GATEWAY_CALL_SECONDS),
        live,
        events,
        _registration: registration,
        _slot: slot,
    };
    call.observe(summary.snapshot);
    call.run().await
}

/// A fresh routing invocation id (`gw-` and 16 hex digits from the OS's random source).
fn invocation_id() -> Option<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).ok()?;
    Some(format!("gw-{}", crate::hex::hex(&bytes)))
}

/// A call holding its client's connection.
struct Call {
    engine: Arc<Engine>,
    style: Style,
    route_id: String,
    /// The newest snapshot of the route this call has seen.
    latest: RouteSnapshot,
    /// The number of the route's latest attempt seen.
    attempts: u32,
    give_up_at: DateTime<Utc>,
    ends_at: Instant,
    live: mpsc::Receiver<Live>,
    /// The engine's route events.
    events: broadcast::Receiver<RouteStreamEvent>,
    leave: Leave,
    _registration: Registration,
    _slot: Slot,
}

/// An attempt's answer.
enum Answer {
    Whole { candidate: String, body: String },
    Opened { attempt: u32, candidate: String },
}

/// What one wait of a held call came to.
enum Step {
    Live(Option<Live>),
    Route(Result<Box<RouteStreamEvent>, RecvError>),
    TimedOut,
}

impl Call {
    fn observe(&mut self, s: RouteSnapshot) {
        if let Some(a) = &s.attempt {
            self.attempts = self.attempts.max(a.number);
        }
        if s.generation > self.latest.generation {
            self.latest = s;
        }
    }

    fn headers(&self, candidate: Option<&str>) -> RouteHeaders {
        RouteHeaders {
            route_id: self.route_id.clone(),
            candidate: candidate.unwrap_or(&self.latest.candidate_id).to_owned(),
            attempts: self.attempts,
        }
    }

    fn error(&self, e: &GatewayError) -> Response {
        reply::error(self.style, e, Some(&self.headers(None)))
    }

    /// Waits for the next thing that happens to the call.
    async fn step(&mut self) -> Step {
        let events = &mut self.events;
        tokio::select! {
            // The dispatcher hands an answer over before it reports the attempt: take it first.
            biased;
            live = self.live.recv() => Step::Live(live),
            event = events.recv() => Step::Route(event.map(Box::new)),
            () = tokio::time::sleep_until(self.ends_at) => Step::TimedOut,
        }
    }

    /// A route event: the route's newest snapshot (read again when events were missed);
    /// `false` when the engine's events ended.
    async fn on_route(&mut self, event: Result<Box<RouteStreamEvent>, RecvError>) -> bool {
        match event {
            Ok(e) if e.route_id == self.route_id => self.observe(e.payload.snapshot),
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => {
                if let Ok(summary) = self.engine.route_summary(&self.route_id).await {
                    self.observe(summary.snapshot);
                }
            }
            Err(RecvError::Closed) => return false,
        }
        true
    }

    /// Holds until the answer, or an error, is known.
    async fn run(mut self) -> Response {
        loop {
            if let Some(answer) = self.live.try_recv().ok().and_then(|l| self.take(l)) {
                return self.respond(answer);
            }
            if let Next::Answer(e) = gateway::judge(&self.latest, self.engine.now(), self.give_up_at) {
                self.leave.armed = false;
                return self.error(&e);
            }
            match self.step().await {
                Step::Live(Some(live)) => {
                    if let Some(answer) = self.take(live) {
                        return self.respond(answer);
                    }
                }
                Step::Route(event) => {
                    if !self.on_route(event).await {
                        return self.error(&GatewayError::new(
                            ErrorKind::Unavailable,
                            "The server is stopping.",
                        ));
                    }
                }
                // The registration keeps a sender: the channel does not close while the call lives.
                Step::Live(None) => {
                    return self.error(&GatewayError::new(
                        ErrorKind::Internal,
                        "The call lost its attempt.",
                    ));
                }
                Step::TimedOut => {
                    // Still armed: the route is abandoned as the client is answered.
                    return self.error(&GatewayError::new(
                        ErrorKind::Unavailable,
                        format!(
                            "No answer within {MAX_GATEWAY_CALL_SECONDS} s; the call's route is abandoned."
                        ),
                    ));
                }
            }
        }
    }

    /// An attempt's answer that reached the call, if it is one.
    fn take(&mut self, live: Live) -> Option<Answer> {
        match live {
            Live::Whole {
                attempt,
                candidate,
                body,
            } => {
                self.attempts = self.attempts.max(attempt);
                Some(Answer::Whole { candidate, body })
            }
            Live::Opened { attempt, candidate } => {
                self.attempts = self.attempts.max(attempt);
                Some(Answer::Opened { attempt, candidate })
            }
            // Events come only after `Opened`; the stream takes them.
            Live::Event(_) | Live::Finished | Live::Broken => None,
        }
    }

    /// The response to an answer: the whole body, or the stream that follows it.
    fn respond(mut self, answer: Answer) -> Response {
        match answer {
            Answer::Whole { candidate, body } => {
                self.leave.armed = false;
                let headers = self.headers(Some(&candidate));
                reply::json(body, Some(&headers))
            }
            Answer::Opened { attempt, candidate } => {
                let headers = self.headers(Some(&candidate));
                reply::stream(self.into_stream(attempt), &headers)
            }
        }
    }

    /// The answer as a stream of the attempt's events, ended by the style's error event when
    /// the attempt fails after its first byte, the route stops it, or the call lasts too long.
    fn into_stream(
        self,
        attempt: u32,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
        futures_util::stream::unfold((self, false), move |(mut call, done)| async move {
            if done {
                return None;
            }
            let (chunk, done) = call.next_chunk(attempt).await;
            chunk.map(|c| (Ok(c), (call, done)))
        })
    }

    /// The stream's next bytes, and whether they are its last.
    async fn next_chunk(&mut self, attempt: u32) -> (Option<Bytes>, bool) {
        loop {
            match self.step().await {
                Step::Live(Some(Live::Event(bytes))) => return (Some(bytes), false),
                Step::Live(Some(Live::Finished)) => {
                    self.leave.armed = false;
                    return (None, true);
                }
                Step::Live(Some(Live::Broken) | None) => {
                    self.leave.armed = false;
                    return (
                        Some(self.stream_error(
                            "The answer broke off after it began; the route stopped for a person (no other \
                             attempt runs for this call).",
                        )),
                        true,
                    );
                }
                Step::Live(Some(_)) => {}
                Step::Route(event) => {
                    if !self.on_route(event).await {
                        return (Some(self.stream_error("The server is stopping.")), true);
                    }
                    if !running(&self.latest, attempt) {
                        self.leave.armed = false;
                        return (
                            Some(self.stream_error(
                                "The route stopped this answer (a person's stop, or the route ended).",
                            )),
                            true,
                        );
                    }
                }
                Step::TimedOut => {
                    // Still armed: the route is abandoned, which stops the attempt.
                    return (
                        Some(self.stream_error(&format!(
                            "The answer lasted longer than {MAX_GATEWAY_CALL_SECONDS} s; the call's route is abandoned."
                        ))),
                        true,
                    );
                }
            }
        }
    }

    fn stream_error(&self, message: &str) -> Bytes {
        Bytes::from(GatewayError::new(ErrorKind::Unavailable, message).stream_event(self.style))
    }
}

/// Whether `attempt` is still the route's running attempt in `s`.
fn running(s: &RouteSnapshot, attempt: u32) -> bool {
    matches!(s.state, StateName::Active | StateName::Retrying)
        && s.attempt
            .as_ref()
            .is_some_and(|a| a.number == attempt && a.dispatch == DispatchState::Started)
}

/// A call's route while its client waits: abandoned when the call is dropped still armed (the
/// client went away, or the call gave up on time), which cancels the running attempt and any
/// pending timer.
struct Leave {
    engine: Arc<Engine>,
    route_id: String,
    armed: bool,
}

impl Drop for Leave {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let engine = self.engine.clone();
        let route_id = std::mem::take(&mut self.route_id);
        runtime.spawn(async move { abandon(&engine, &route_id).await });
    }
}

/// Abandons the route at its current generation (again, should another change win the race).
async fn abandon(engine: &Engine, route_id: &str) {
    for _ in 0..5 {
        let Ok(summary) = engine.route_summary(route_id).await else {
            return;
        };
        if summary.snapshot.state.is_terminal() {
            return;
        }
        let event = RouteEvent::Abandon {
            expected_generation: summary.snapshot.generation,
        };
        match engine.submit(route_id, Input::Event(event)).await {
            Ok(_) => {
                tracing::info!(route_id, "gateway client went away; its route is abandoned");
                return;
            }
            Err(EngineError::Rejected { .. }) => continue,
            Err(e) => {
                tracing::warn!(route_id, error = %e, "gateway client went away; its route could not be abandoned");
                return;
            }
        }
    }
}
