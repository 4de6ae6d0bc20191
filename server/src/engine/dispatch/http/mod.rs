//! The `http` dispatcher: one-shot utility calls to an LLM HTTP API that Recourse makes itself
//! (design contracts 1, 5 and 7).
//!
//! A started attempt on an `http` candidate calls the candidate's endpoint (the server's
//! configuration, by the target's `runner` id) exactly once, in a task of its own:
//! - OpenAI-compatible chat completions ([`openai`]) or Anthropic Messages ([`anthropic`]), with
//!   the endpoint's model and the route's work (messages and params);
//! - the key is read from the environment variable the endpoint names, at call time, into the
//!   request's header (marked sensitive) and nowhere else: not the envelope, not a log line,
//!   not an error. An unset variable is a failure that names the variable;
//! - streamed when the endpoint says `stream = true` (the work cannot ask: `policy` reserves
//!   `stream` in its params, the endpoint's configuration owns it); the result is the whole
//!   message either way;
//! - every request carries `X-Client-Request-Id: <route id>/<attempt>/<invocation id>`, unique
//!   per attempt (attempts are numbered per route), so a provider's logs and ours name the same
//!   call. The client never retries on its own (`retry::never`, no redirects): one attempt is
//!   one request;
//! - connect, read and whole-call timeouts, and the answer bounded, from the endpoint
//!   ([`call`]).
//!
//! Success reports the result (the response body, or the assembled message of a stream; the
//! route stores it for `GET /api/v1/routes/{id}/result`). Failure reports the evidence
//! envelope ([`evidence`]). A failure found before anything is sent (no endpoint, no messages,
//! no key) is reported at once with the launch; the call's own outcome through the attempt's
//! [`Reporter`](super::Reporter), fenced by its generation. [`Dispatcher::cancel`] drops the
//! call in flight (its connection closes); its late report would be stale anyway.
//!
//! A gateway call (`crate::gateway`) listens to its route's attempts through [`live`], the one
//! seam between this dispatcher and a caller that holds a client's connection: the provider is
//! asked the client's way and the answer goes to the client instead of the route's result.
//!
//! TLS is rustls with the `ring` provider, installed as the process default when the
//! dispatcher is made (if another provider was installed first, that one is used).

mod anthropic;
mod call;
mod evidence;
mod live;
mod openai;
mod sse;

pub(crate) use live::{Asking, Live, LiveCalls, Registration};

use super::{DispatchError, DispatchFuture, Dispatcher, LaunchRequest, Launched, Report};
use crate::config::{ApiStyle, EndpointConfig};
use call::{CallRequest, Failure, Outcome, Timeouts};
use evidence::Identity;
use live::Sink;
use reqwest::{
    header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, USER_AGENT},
    Client,
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::task::AbortHandle;

/// The routing invocation id header.
pub(crate) const REQUEST_ID_HEADER: &str = "x-client-request-id";

/// Calls in flight, by route and attempt: the generation each began at, and its task.
type Running = Arc<Mutex<HashMap<(String, u32), (u64, AbortHandle)>>>;

pub(crate) struct Http {
    /// One client per (connect, read) timeout pair: those are the client's settings; the
    /// whole-call timeout is the request's.
    clients: Mutex<HashMap<(Duration, Duration), Client>>,
    running: Running,
    /// Gateway calls listening to their routes' attempts.
    live: LiveCalls,
}

impl Http {
    pub(crate) fn new(live: LiveCalls) -> Http {
        // Err: a provider is installed already (a second engine in this process, or a library
        // that chose one); it serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Http {
            clients: Mutex::new(HashMap::new()),
            running: Arc::new(Mutex::new(HashMap::new())),
            live,
        }
    }

    fn client(&self, t: &Timeouts) -> Result<Client, reqwest::Error> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(&(t.connect, t.read)) {
            return Ok(c.clone());
        }
        let client = Client::builder()
            .connect_timeout(t.connect)
            .read_timeout(t.read)
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        clients.insert((t.connect, t.read), client.clone());
        Ok(client)
    }
}

impl Dispatcher for Http {
    fn launch(&self, r: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>> {
        Box::pin(async move {
            let endpoint = r
                .target
                .runner
                .as_deref()
                .and_then(|id| r.config.endpoint(id))
                .cloned();
            let listener = self.live.listener(&r.invocation_id);
            let endpoint_id = endpoint
                .as_ref()
                .map_or_else(|| r.target.runner.clone().unwrap_or_default(), |e| e.id.clone());
            let prepared = endpoint
                .as_ref()
                .ok_or_else(|| Failure::before_sending("is not in the server's configuration".into()))
                .and_then(|e| prepare(&r, e, listener.as_ref().map(|l| &*l.asking)))
                .and_then(|request| {
                    self.client(&request.timeouts)
                        .map(|client| (client, request))
                        .map_err(|_| Failure::before_sending("the HTTP client could not be built".into()))
                });
            let identity = Owned {
                invocation_id: r.invocation_id.clone(),
                generation: r.invocation_generation,
                endpoint_id,
                provider_id: r
                    .target
                    .provider_id
                    .clone()
                    .or_else(|| endpoint.as_ref().and_then(|e| e.provider_id.clone())),
                model_id: r
                    .target
                    .model_id
                    .clone()
                    .or_else(|| endpoint.as_ref().map(|e| e.model.clone())),
            };
            let (client, request) = match prepared {
                Ok(prepared) => prepared,
                Err(failure) => {
                    tracing::info!(
                        route_id = r.route_id,
                        attempt = r.attempt,
                        endpoint = identity.endpoint_id,
                        "http call not sent"
                    );
                    return Ok(Some(Launched {
                        audit: false,
                        report: Some((
                            r.now,
                            Report::Failed {
                                envelope: evidence::envelope(&identity.borrow(), &failure, r.now),
                            },
                        )),
                    }));
                }
            };
            let key = (r.route_id.clone(), r.attempt);
            let began = r.invocation_generation;
            let running = self.running.clone();
            let mut map = running.lock().unwrap_or_else(|e| e.into_inner());
            let task_running = self.running.clone();
            let task_key = key.clone();
            let mut sink = listener.map(|l| Sink::new(l, r.attempt, &r.target.id));
            let handle = tokio::spawn(async move {
                let outcome = call::perform(&client, request, sink.as_mut()).await;
                let report = match outcome {
                    Outcome::Succeeded(body) => {
                        tracing::info!(
                            route_id = r.route_id,
                            attempt = r.attempt,
                            endpoint = identity.endpoint_id,
                            live = sink.is_some(),
                            "http call succeeded"
                        );
                        if let Some(sink) = sink.as_mut().filter(|s| !s.delivered()) {
                            sink.whole(&body).await;
                        }
                        // The client has the answer: nothing to keep for it.
                        let delivered = sink.as_ref().is_some_and(Sink::delivered);
                        Report::Succeeded {
                            result: (!delivered).then_some(body),
                        }
                    }
                    Outcome::Failed(failure) => {
                        if let Some(sink) = sink.as_mut() {
                            sink.failed().await;
                        }
                        tracing::info!(
                            route_id = r.route_id,
                            attempt = r.attempt,
                            endpoint = identity.endpoint_id,
                            status = failure.answer.as_ref().map(|a| a.status),
                            phase = ?failure.phase,
                            delivery = ?failure.delivery,
                            partial_result = failure.partial_result,
                            "http call failed"
                        );
                        let at = r.reporter.now().unwrap_or(r.now);
                        Report::Failed {
                            envelope: evidence::envelope(&identity.borrow(), &failure, at),
                        }
                    }
                };
                // The call is over: a cancel from here on has nothing to stop.
                task_running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&task_key);
                // A live call whose client has the whole answer is done: its route completes
                // with the success (a gateway call is one prompt).
                let finished =
                    matches!(report, Report::Succeeded { .. }) && sink.as_ref().is_some_and(Sink::answered);
                let reported = match finished {
                    true => r.reporter.report_finished(report).await,
                    false => r.reporter.report(report).await,
                };
                if let Err(e) = reported {
                    tracing::debug!(route_id = r.route_id, attempt = r.attempt, error = %e, "http report not applied");
                }
            });
            map.insert(key, (began, handle.abort_handle()));
            Ok(None)
        })
    }

    fn wants_work(&self) -> bool {
        true
    }

    fn cancel(&self, route_id: &str, attempt: u32) {
        let handle = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(route_id.to_owned(), attempt));
        if let Some((_, h)) = handle {
            tracing::info!(route_id, attempt, "http call cancelled");
            h.abort();
        }
    }

    fn cancel_started_before(&self, route_id: &str, generation: u64) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|(route, attempt), (began, h)| {
            let stop = route == route_id && *began < generation;
            if stop {
                tracing::info!(
                    route_id,
                    attempt,
                    "the route moved on through another replica; http call cancelled"
                );
                h.abort();
            }
            !stop
        });
    }
}

/// The attempt's identity, owned by its task.
struct Owned {
    invocation_id: String,
    generation: u64,
    endpoint_id: String,
    provider_id: Option<String>,
    model_id: Option<String>,
}

impl Owned {
    fn borrow(&self) -> Identity<'_> {
        Identity {
            invocation_id: &self.invocation_id,
            generation: self.generation,
            endpoint_id: &self.endpoint_id,
            provider_id: self.provider_id.as_deref(),
            model_id: self.model_id.as_deref(),
        }
    }
}

/// The request for this attempt, or why it cannot be sent. A live listener's `asking` decides
/// whether it streams and adds its pass-through headers.
fn prepare(r: &LaunchRequest, e: &EndpointConfig, asking: Option<&Asking>) -> Result<CallRequest, Failure> {
    let Some(work) = r.work.as_ref().filter(|w| !w.messages.is_empty()) else {
        return Err(Failure::before_sending(
            "the route carries no messages to send".into(),
        ));
    };
    let variable = &e.api_key_env;
    let key = match std::env::var(variable) {
        Ok(k) if !k.is_empty() => k,
        Ok(_) => {
            return Err(Failure::before_sending(format!(
                "the environment variable {variable} that holds the API key is empty"
            )))
        }
        Err(std::env::VarError::NotPresent) => {
            return Err(Failure::before_sending(format!(
                "the environment variable {variable} that holds the API key is not set"
            )))
        }
        Err(std::env::VarError::NotUnicode(_)) => return Err(invalid_key(variable)),
    };
    let stream = asking.map_or(e.stream, |a| a.stream);
    let mut headers = HeaderMap::new();
    // The client's pass-through headers first: Recourse's own below replace any of the same name.
    for (name, value) in asking.into_iter().flat_map(|a| &a.headers) {
        headers.insert(name.clone(), value.clone());
    }
    let (path, body) = match e.style {
        ApiStyle::Openai => {
            let (name, value) = openai::auth(&key).ok_or_else(|| invalid_key(variable))?;
            headers.insert(name, value);
            let mut body = openai::body(&e.model, work, stream);
            if let Some(options) = asking.and_then(|a| a.stream_options.as_ref()).filter(|_| stream) {
                body["stream_options"] = options.clone();
            }
            (openai::PATH, body)
        }
        ApiStyle::Anthropic => {
            for (name, value) in anthropic::auth(&key).ok_or_else(|| invalid_key(variable))? {
                headers.insert(name, value);
            }
            (anthropic::PATH, anthropic::body(&e.model, work, stream))
        }
    };
    drop(key);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static(if stream {
            "text/event-stream"
        } else {
            "application/json"
        }),
    );
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("recourse/", env!("CARGO_PKG_VERSION"))),
    );
    // The invocation id is an identifier (letters, digits and `._:/@+-`), a valid header value.
    let request_id = HeaderValue::from_str(&format!("{}/{}/{}", r.route_id, r.attempt, r.invocation_id))
        .or_else(|_| HeaderValue::from_str(&format!("{}/{}", r.route_id, r.attempt)))
        .map_err(|_| Failure::before_sending("the route id is not a valid header value".into()))?;
    headers.insert(HeaderName::from_static(REQUEST_ID_HEADER), request_id);
    let request = CallRequest {
        url: format!("{}{path}", e.base_url.trim_end_matches('/')),
        headers,
        body: body.to_string().into_bytes(),
        style: e.style,
        stream,
        timeouts: Timeouts {
            connect: Duration::from_secs(e.connect_timeout),
            read: Duration::from_secs(e.read_timeout),
            total: Duration::from_secs(e.request_timeout),
        },
        max_response_bytes: e.max_response_bytes,
    };
    Ok(request)
}

fn invalid_key(variable: &str) -> Failure {
    Failure::before_sending(format!(
        "the environment variable {variable} that holds the API key is not a valid header value"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_read_from_another_replica_cancels_only_the_routes_calls_begun_before_it() {
        let http = Http::new(LiveCalls::default());
        let call = || tokio::spawn(std::future::pending::<()>());
        let (early, late, other) = (call(), call(), call());
        {
            let mut running = http.running.lock().unwrap();
            running.insert(("r1".into(), 1), (5, early.abort_handle()));
            running.insert(("r1".into(), 2), (9, late.abort_handle()));
            running.insert(("r2".into(), 1), (5, other.abort_handle()));
        }
        // r1 was stopped at generation 7: attempt 1 (begun at 5) is stopped; attempt 2, begun
        // at 9 after a person retried, and the other route's call go on.
        http.cancel_started_before("r1", 7);
        assert!(early.await.unwrap_err().is_cancelled());
        let left: Vec<_> = http.running.lock().unwrap().keys().cloned().collect();
        assert_eq!(left.len(), 2);
        assert!(left.contains(&("r1".into(), 2)) && left.contains(&("r2".into(), 1)));
        assert!(!late.is_finished() && !other.is_finished());
        late.abort();
        other.abort();
    }
}
