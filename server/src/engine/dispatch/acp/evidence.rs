//! What one attempt observed, in order, and the evidence envelope (design contract 1) built
//! from it.
//!
//! The [`Recorder`] is shared by the protocol session (which feeds it as messages arrive) and
//! the attempt (which reads it after the session ends, whatever ended it, a timeout included).
//! It keeps facts, not judgements: the updates as the agent sent them (bounded), the prompt's
//! result or error, whether the prompt was written and whether the agent answered it, tool
//! activity. Whether message text is real output or a failure banner is the classifier's call:
//! nothing here reads text. What goes out live is each update as the agent sent it, to the
//! recorder's [`Live`] sink: the route's event stream shows it bounded and with every string
//! redacted ([`shown`]); an editor (`recourse acp`) gets it whole, as the agent would have sent
//! it there. The kept ones stay as sent, for the classifier.
//!
//! Bounds: each kept update at most [`MAX_UPDATE_BYTES`] of JSON (a larger one keeps its kind,
//! ids, status and the first [`MAX_UPDATE_BYTES`] of its text), at most [`MAX_UPDATES`] updates
//! and [`MAX_UPDATES_BYTES`] in all. When the bound is reached the oldest updates go (failure
//! signals come last), and what they showed is kept as effects: a dropped message chunk counts
//! as assistant output, a dropped tool update as tool activity, so a cut never opens the gate.

use super::process::Ended;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::{
    collections::{HashSet, VecDeque},
    sync::{Arc, Mutex},
};

pub(crate) use policy::classification::{Phase, PromptDelivery};

use crate::engine::dispatch::Reporter;

/// Most updates kept for the envelope (the classifier examines as many).
pub(super) const MAX_UPDATES: usize = classifier::envelope::MAX_UPDATES;
/// Largest kept update, in bytes of JSON.
pub(super) const MAX_UPDATE_BYTES: usize = classifier::envelope::MAX_TEXT_BYTES;
/// All kept updates together, in bytes of JSON.
pub(super) const MAX_UPDATES_BYTES: usize = 512 * 1024;

/// A JSON-RPC error as the agent sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct RpcError {
    pub(super) code: i64,
    pub(super) message: String,
    pub(super) data: Option<Value>,
}

/// Everything observed so far.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    pub(super) phase: Option<Phase>,
    /// The agent advertised `loadSession`.
    pub(super) load_session: bool,
    /// The ids of the authentication methods it offered, once it answered `initialize`.
    pub(super) auth_methods: Option<Vec<String>>,
    /// The provider-native session of this attempt.
    pub(super) session_id: Option<String>,
    /// An error answer to a request before the prompt.
    pub(super) agent_error: Option<RpcError>,
    pub(super) prompt_sent: bool,
    /// The agent sent something for the prompt (an update, a request, its answer).
    pub(super) answered: bool,
    pub(super) updates: VecDeque<Value>,
    updates_bytes: usize,
    /// Every update of this prompt, kept or not.
    pub(super) update_count: u64,
    /// History replayed by `session/load` (not evidence of this prompt).
    pub(super) replayed: u64,
    pub(super) dropped_output: bool,
    pub(super) tool_activity: bool,
    /// Tool calls started and not completed or failed.
    open_tools: HashSet<String>,
    pub(super) prompt_result: Option<Value>,
    pub(super) prompt_error: Option<RpcError>,
    pub(super) cancel_requested: bool,
    /// A resumed attempt: the session already holds output of this prompt generation.
    pub(super) prior_output: bool,
}

impl Transcript {
    /// The phase the attempt ended in: `tool` while a tool call is open.
    pub(super) fn final_phase(&self) -> Phase {
        if !self.open_tools.is_empty() {
            return Phase::Tool;
        }
        self.phase.unwrap_or(Phase::Launch)
    }

    pub(super) fn delivery(&self) -> PromptDelivery {
        if !self.prompt_sent {
            PromptDelivery::NotSent
        } else if self.answered {
            PromptDelivery::Confirmed
        } else {
            PromptDelivery::Ambiguous
        }
    }

    /// The prompt's stop reason, when it was answered with a result.
    pub(crate) fn stop_reason(&self) -> Option<&str> {
        self.prompt_result.as_ref()?.get("stopReason")?.as_str()
    }
}

/// Where each update of an attempt goes live, as the agent sent it.
pub(crate) trait Live: Send + Sync {
    fn update(&self, update: &Value);
}

/// The route's event stream: bounded, every string redacted.
impl Live for Reporter {
    fn update(&self, update: &Value) {
        Reporter::update(self, shown(&bound_update(update.clone())));
    }
}

/// The shared, append-only record of one attempt; also forwards each update live.
#[derive(Clone)]
pub(crate) struct Recorder {
    inner: Arc<Mutex<Transcript>>,
    live: Option<Arc<dyn Live>>,
}

impl Recorder {
    pub(crate) fn new(live: Option<Arc<dyn Live>>) -> Recorder {
        Recorder {
            inner: Arc::new(Mutex::new(Transcript::default())),
            live,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Transcript) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A copy of what was observed.
    pub(crate) fn snapshot(&self) -> Transcript {
        self.with(|t| Transcript {
            phase: t.phase,
            load_session: t.load_session,
            auth_methods: t.auth_methods.clone(),
            session_id: t.session_id.clone(),
            agent_error: t.agent_error.clone(),
            prompt_sent: t.prompt_sent,
            answered: t.answered,
            updates: t.updates.clone(),
            updates_bytes: t.updates_bytes,
            update_count: t.update_count,
            replayed: t.replayed,
            dropped_output: t.dropped_output,
            tool_activity: t.tool_activity,
            open_tools: t.open_tools.clone(),
            prompt_result: t.prompt_result.clone(),
            prompt_error: t.prompt_error.clone(),
            cancel_requested: t.cancel_requested,
            prior_output: t.prior_output,
        })
    }

    pub(crate) fn phase(&self, phase: Phase) {
        self.with(|t| t.phase = Some(phase));
    }

    pub(super) fn capabilities(&self, load_session: bool) {
        self.with(|t| t.load_session = load_session);
    }

    pub(super) fn auth_methods(&self, ids: Vec<String>) {
        self.with(|t| t.auth_methods = Some(ids));
    }

    pub(super) fn session(&self, id: &str) {
        let id: String = id.chars().take(classifier::envelope::MAX_SHORT_BYTES).collect();
        self.with(|t| t.session_id = Some(id));
    }

    pub(super) fn agent_error(&self, e: RpcError) {
        self.with(|t| t.agent_error = Some(bounded_error(e)));
    }

    pub(super) fn prompt_sent(&self) {
        self.with(|t| {
            t.prompt_sent = true;
            t.phase = Some(Phase::Prompt);
        });
    }

    /// This attempt continues a session that already holds output of the prompt generation:
    /// that output is this attempt's effect too.
    pub(super) fn prior_output(&self) {
        self.with(|t| t.prior_output = true);
    }

    pub(super) fn cancel_sent(&self) {
        self.with(|t| t.cancel_requested = true);
    }

    pub(super) fn replayed(&self) {
        self.with(|t| t.replayed += 1);
    }

    /// One `session/update` of the prompt, as the agent sent it.
    pub(super) fn update(&self, update: Value) {
        if let Some(live) = &self.live {
            live.update(&update);
        }
        let update = bound_update(update);
        self.with(|t| {
            t.answered = true;
            t.update_count += 1;
            if t.phase == Some(Phase::Prompt) {
                t.phase = Some(Phase::Streaming);
            }
            let kind = update["sessionUpdate"].as_str().unwrap_or_default();
            if matches!(kind, "tool_call" | "tool_call_update") {
                t.tool_activity = true;
                let id = update["toolCallId"].as_str().unwrap_or_default().to_owned();
                match update["status"].as_str() {
                    Some("completed" | "failed") => {
                        t.open_tools.remove(&id);
                    }
                    _ if kind == "tool_call" => {
                        t.open_tools.insert(id);
                    }
                    _ => {}
                }
            }
            let size = update.to_string().len();
            t.updates.push_back(update);
            t.updates_bytes += size;
            while t.updates.len() > MAX_UPDATES || t.updates_bytes > MAX_UPDATES_BYTES {
                let Some(old) = t.updates.pop_front() else { break };
                t.updates_bytes = t.updates_bytes.saturating_sub(old.to_string().len());
                match old["sessionUpdate"].as_str() {
                    Some("agent_message_chunk") => t.dropped_output = true,
                    Some("tool_call" | "tool_call_update") => t.tool_activity = true,
                    _ => {}
                }
            }
        });
    }

    /// A request of the agent for this prompt (permission, file system, terminal, ...).
    pub(super) fn agent_request(&self, _method: &str, replay: bool) {
        if !replay {
            self.with(|t| t.answered = true);
        }
    }

    /// A permission request: the agent wants to run a tool. Tool activity, whatever we answer.
    pub(super) fn tool_requested(&self, _tool_call: Value) {
        self.with(|t| t.tool_activity = true);
    }

    pub(super) fn prompt_result(&self, result: Value) {
        self.with(|t| {
            t.answered = true;
            t.prompt_result = Some(result);
        });
    }

    pub(super) fn prompt_error(&self, e: RpcError) {
        self.with(|t| {
            t.answered = true;
            t.prompt_error = Some(bounded_error(e));
        });
    }
}

/// An update reduced to its bound: small ones unchanged; a larger one keeps its scalar fields
/// and the start of its text.
fn bound_update(update: Value) -> Value {
    if update.to_string().len() <= MAX_UPDATE_BYTES {
        return update;
    }
    let mut reduced = Map::new();
    if let Value::Object(o) = &update {
        for (k, v) in o {
            if !v.is_object() && !v.is_array() && !v.is_string() {
                reduced.insert(k.clone(), v.clone());
            } else if let Value::String(s) = v {
                reduced.insert(k.clone(), Value::String(cut(s, 256)));
            }
        }
        if let Some(text) = o
            .get("content")
            .and_then(|c| c.get("text"))
            .and_then(Value::as_str)
        {
            let text = cut(text, MAX_UPDATE_BYTES - 1024);
            reduced.insert("content".into(), json!({"type": "text", "text": text}));
        }
    }
    reduced.insert("truncated".into(), Value::Bool(true));
    Value::Object(reduced)
}

/// What of an update may leave the process live (the route's event stream): every string in
/// it, keys too, redacted as excerpts are (`classifier::redact`), since an agent's output can
/// hold whatever it read (a key in a file, a provider's banner with account identifiers).
/// The kept update, for the classifier, stays as the agent sent it: the classifier redacts
/// what it shows itself.
///
/// An id field (`toolCallId`, `terminalId`, any key ending in `Id`) whose value redaction
/// would remove, as it removes `toolu_01…` and UUIDs, gets a [`pseudonym`] instead of
/// `[redacted]`: a client still tells one tool call's updates from another's, and learns
/// nothing of the id.
///
/// A value a name beside it calls a credential (`{"x-api-key": "opensesame"}`, a header pair
/// `["Authorization", "Basic …"]`, `{"name": "Authorization", "value": …}`: the one
/// definition is `classifier::redact::names`) is shown as `[redacted]` whatever it looks like:
/// redacting its string alone would never see the word that names it.
fn shown(update: &Value) -> Value {
    use classifier::redact::names;
    match update {
        Value::String(s) => Value::String(classifier::redact::redact(s)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| match names::credential_element(items, i) {
                    true => Value::String(REDACTED.into()),
                    false => shown(v),
                })
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        _ if names::credential_member(fields, k) && !is_protocol_key(k) => REDACTED.into(),
                        Value::String(id) if is_id_key(k) => Value::String(shown_id(id)),
                        v => shown(v),
                    };
                    (classifier::redact::redact(k), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// ACP's own keys whose words would otherwise name a credential (`session`).
fn is_protocol_key(key: &str) -> bool {
    matches!(key, "sessionUpdate" | "sessionId")
}

/// What [`shown`] puts in place of a value a name calls a credential.
const REDACTED: &str = "[redacted]";

fn is_id_key(key: &str) -> bool {
    key == "id" || key.ends_with("Id")
}

/// An id as it may be shown: as sent when redaction leaves it whole, else its pseudonym (or
/// the redaction, if the process has no key).
fn shown_id(id: &str) -> String {
    let redacted = classifier::redact::redact(id);
    if redacted == id {
        return redacted;
    }
    pseudonym(id).unwrap_or(redacted)
}

/// `id-` and 16 hex digits of a SHA-256 over a key drawn at random once per process and the
/// id: equal ids get equal pseudonyms within this process, and the pseudonym cannot be
/// checked against a guessed id without the key, which never leaves the process. `None`
/// when the system gave no randomness for the key.
fn pseudonym(id: &str) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::sync::OnceLock;
    static KEY: OnceLock<Option<[u8; 32]>> = OnceLock::new();
    let key = KEY.get_or_init(|| {
        let mut key = [0; 32];
        getrandom::fill(&mut key).ok().map(|()| key)
    });
    let digest = Sha256::new()
        .chain_update((*key)?)
        .chain_update(id.as_bytes())
        .finalize();
    Some(format!("id-{}", crate::hex::hex(&digest[..8])))
}

fn bounded_error(mut e: RpcError) -> RpcError {
    e.message = cut(&e.message, MAX_UPDATE_BYTES);
    if let Some(d) = &e.data {
        let s = d.to_string();
        if s.len() > MAX_UPDATE_BYTES {
            e.data = Some(Value::String(cut(&s, MAX_UPDATE_BYTES)));
        }
    }
    e
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Who the evidence is about.
pub(crate) struct Identity<'a> {
    pub(crate) invocation_id: &'a str,
    pub(crate) generation: u64,
    pub(crate) provider_id: Option<&'a str>,
    pub(crate) model_id: Option<&'a str>,
    pub(crate) agent: &'a str,
}

/// The evidence envelope of an attempt that did not succeed: the identity, the phase and
/// effects, and the items in the order the agent produced them (an error answer before the
/// prompt, the prompt's updates with its result or error, the stderr ring, the exit). The
/// process's part is what [`Ended`] says is evidence: the exit only when the agent ended the
/// session itself, never the end Recourse gave it.
pub(crate) fn envelope(id: &Identity<'_>, t: &Transcript, ended: Option<&Ended>) -> Value {
    let stderr = ended.map_or(&[][..], Ended::stderr);
    let exit = ended.and_then(Ended::exit);
    let mut items = Vec::new();
    if let Some(e) = &t.agent_error {
        items.push(json!({"kind": "acp_error", "code": e.code, "message": e.message, "data": e.data}));
    }
    if t.prompt_sent {
        items.push(json!({
            "kind": "acp_updates",
            "updates": t.updates,
            "prompt_result": t.prompt_result,
            "prompt_error": t.prompt_error.as_ref().map(|e| json!({"code": e.code, "message": e.message, "data": e.data})),
        }));
    }
    if !stderr.is_empty() {
        items.push(json!({"kind": "stderr", "lines": stderr}));
    }
    if let Some(x) = exit {
        items.push(json!({"kind": "process_exit", "code": x.code, "signal": x.signal}));
    }
    let mut env = json!({
        "invocation_id": id.invocation_id,
        "generation": id.generation,
        "phase": t.final_phase(),
        "agent": id.agent,
        "cancel_requested": t.cancel_requested,
        "effects": {
            "assistant_output": t.dropped_output || t.prior_output,
            "tool_activity": t.tool_activity,
            "partial_result": false,
            "prompt_delivery": t.delivery(),
        },
        "items": items,
    });
    for (key, value) in [("provider_id", id.provider_id), ("model_id", id.model_id)] {
        if let Some(v) = value {
            env[key] = json!(v);
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::dispatch::acp::process::ExitInfo;

    fn chunk(text: &str) -> Value {
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    }

    #[test]
    fn a_live_tool_calls_id_is_shown_as_a_stable_pseudonym_when_it_looks_like_a_token() {
        let update = |id: &str, status: &str| {
            json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
                "content": [{"type": "terminal", "terminalId": "term-1"}]})
        };
        let first = "toolu_01A09q90qw90lq917835lq9F";
        let other = "call_8Fz2Qm1xYk3LpW7vT9sR4bNc";
        let (a, b, c) = (
            shown(&update(first, "in_progress")),
            shown(&update(first, "completed")),
            shown(&update(other, "completed")),
        );
        let id = a["toolCallId"].as_str().unwrap();
        assert!(id.starts_with("id-") && id.len() == 19, "{id}");
        assert_eq!(a["toolCallId"], b["toolCallId"], "one tool call, one id");
        assert_ne!(a["toolCallId"], c["toolCallId"], "two tool calls, two ids");
        for live in [&a, &b, &c] {
            let text = live.to_string();
            assert!(!text.contains("lq917835") && !text.contains("Qm1xYk3L"), "{text}");
        }
        assert_eq!(
            a["content"][0]["terminalId"], "term-1",
            "an id redaction leaves whole stays"
        );
        // A secret under an id key is not shown either.
        let key = "sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH";
        let live = shown(&json!({"sessionUpdate": "tool_call", "toolCallId": format!("x {key}")}));
        assert!(!live.to_string().contains("Zq8vN2xYpL4mK7rT"), "{live}");
    }

    #[test]
    fn a_value_a_name_calls_a_credential_is_never_shown_whatever_it_looks_like() {
        // Plain words redaction alone would keep: only the name beside them says what they are.
        let update = json!({"sessionUpdate": "tool_call", "toolCallId": "t1",
            "rawInput": {"headers": {"x-api-key": "opensesame please"},
                "pairs": ["Accept", "text/plain", "Authorization", "Basic letmein"],
                "named": [{"name": "X-Goog-Api-Key", "value": "correct horse battery"},
                          {"name": "Accept", "value": "text/plain"}],
                "password": {"nested": "hunter two"}}});
        let live = shown(&update);
        let text = live.to_string();
        for secret in ["opensesame", "letmein", "correct horse", "hunter two"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
        let raw = &live["rawInput"];
        assert_eq!(raw["headers"]["x-api-key"], REDACTED);
        assert_eq!(
            raw["pairs"],
            json!(["Accept", "text/plain", "Authorization", REDACTED])
        );
        assert_eq!(raw["named"][0]["value"], REDACTED);
        assert_eq!(
            raw["named"][1]["value"], "text/plain",
            "what no name calls a credential stays"
        );
        assert_eq!(
            raw["password"], REDACTED,
            "a credential's key hides all beneath it"
        );
        assert_eq!(live["toolCallId"], "t1");
        assert_eq!(
            live["sessionUpdate"], "tool_call",
            "ACP's own keys are not credentials"
        );
    }

    #[test]
    fn a_live_update_shows_every_string_redacted_and_the_kept_one_stays_as_sent() {
        let key = "sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH";
        let update = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("I found ANTHROPIC_API_KEY={key} in .env")},
            "_meta": {"headers": [format!("Authorization: Bearer {key}")], key: true}});
        let live = shown(&update);
        let text = live.to_string();
        assert!(!text.contains(&key[..24]), "{text}");
        assert!(!text.contains("Zq8vN2xYpL4mK7rT"), "{text}");
        assert_eq!(
            live["sessionUpdate"], "agent_message_chunk",
            "protocol words stay"
        );
        assert_eq!(live["content"]["type"], "text");
        assert!(
            live["content"]["text"].as_str().unwrap().starts_with("I found "),
            "{text}"
        );
        assert!(
            live["content"]["text"].as_str().unwrap().ends_with(" in .env"),
            "{text}"
        );
        assert!(live["content"]["text"].as_str().unwrap().contains("[redacted]"));
        assert!(live["_meta"]["headers"][0]
            .as_str()
            .unwrap()
            .contains("[redacted]"));
        // The recorder keeps what the agent sent, for the classifier.
        let rec = Recorder::new(None);
        rec.prompt_sent();
        rec.update(update.clone());
        assert_eq!(rec.snapshot().updates[0], update);
    }

    #[test]
    fn delivery_is_not_sent_then_ambiguous_then_confirmed() {
        let rec = Recorder::new(None);
        assert_eq!(rec.snapshot().delivery(), PromptDelivery::NotSent);
        rec.prompt_sent();
        assert_eq!(rec.snapshot().delivery(), PromptDelivery::Ambiguous);
        rec.update(chunk("hi"));
        assert_eq!(rec.snapshot().delivery(), PromptDelivery::Confirmed);
        assert_eq!(rec.snapshot().final_phase(), Phase::Streaming);
    }

    #[test]
    fn an_open_tool_call_ends_in_the_tool_phase_and_a_permission_request_is_tool_activity() {
        let rec = Recorder::new(None);
        rec.prompt_sent();
        rec.update(json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "status": "pending"}));
        let t = rec.snapshot();
        assert!(t.tool_activity);
        assert_eq!(t.final_phase(), Phase::Tool);
        rec.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}));
        assert_eq!(rec.snapshot().final_phase(), Phase::Streaming);

        let rec = Recorder::new(None);
        rec.prompt_sent();
        rec.tool_requested(json!({"toolCallId": "t2"}));
        assert!(rec.snapshot().tool_activity);
    }

    #[test]
    fn dropping_old_updates_keeps_what_they_showed_as_effects() {
        let rec = Recorder::new(None);
        rec.prompt_sent();
        rec.update(chunk("real output"));
        for _ in 0..MAX_UPDATES {
            rec.update(json!({"sessionUpdate": "plan", "entries": []}));
        }
        let t = rec.snapshot();
        assert_eq!(t.updates.len(), MAX_UPDATES);
        assert!(t.dropped_output, "a dropped message chunk counts as output");
        let env = envelope(
            &Identity {
                invocation_id: "inv",
                generation: 3,
                provider_id: Some("p"),
                model_id: None,
                agent: "a",
            },
            &t,
            None,
        );
        assert_eq!(env["effects"]["assistant_output"], true);
    }

    #[test]
    fn an_oversize_update_keeps_its_kind_and_the_start_of_its_text() {
        let big = "x".repeat(MAX_UPDATE_BYTES * 2);
        let b = bound_update(chunk(&big));
        assert_eq!(b["sessionUpdate"], "agent_message_chunk");
        assert_eq!(b["truncated"], true);
        assert!(b.to_string().len() <= MAX_UPDATE_BYTES);
    }

    #[test]
    fn an_agent_recourse_stopped_gives_its_stderr_until_then_and_never_its_exit() {
        let rec = Recorder::new(None);
        rec.prompt_sent();
        rec.update(chunk("Done."));
        rec.prompt_result(json!({"stopReason": "end_turn"}));
        let id = Identity {
            invocation_id: "inv",
            generation: 1,
            provider_id: None,
            model_id: None,
            agent: "claude",
        };
        let running = Ended::Running {
            stderr: vec!["a warning".to_owned()],
        };
        let env = envelope(&id, &rec.snapshot(), Some(&running));
        let kinds: Vec<&str> = env["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["acp_updates", "stderr"], "{env}");
        let crashed = Ended::ByItself {
            exit: ExitInfo {
                code: None,
                signal: Some("SIGABRT".to_owned()),
            },
            stderr: vec![],
        };
        let env = envelope(&id, &rec.snapshot(), Some(&crashed));
        assert_eq!(env["items"][1]["kind"], "process_exit", "{env}");
        assert_eq!(env["items"][1]["signal"], "SIGABRT");
    }

    #[test]
    fn the_envelope_keeps_the_agents_order_and_parses() {
        let rec = Recorder::new(None);
        rec.phase(Phase::SessionInit);
        rec.prompt_sent();
        rec.update(chunk("API Error: 529"));
        rec.prompt_result(json!({"stopReason": "end_turn"}));
        let env = envelope(
            &Identity {
                invocation_id: "inv",
                generation: 3,
                provider_id: Some("anthropic"),
                model_id: None,
                agent: "claude",
            },
            &rec.snapshot(),
            Some(&Ended::ByItself {
                exit: ExitInfo {
                    code: Some(0),
                    signal: None,
                },
                stderr: vec!["boom".to_owned()],
            }),
        );
        let kinds: Vec<&str> = env["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["acp_updates", "stderr", "process_exit"]);
        assert_eq!(env["effects"]["prompt_delivery"], "confirmed");
        let parsed = classifier::Envelope::from_value(&env).unwrap();
        assert_eq!(parsed.generation, Some(3));
        assert!(!parsed.truncated);
    }
}
