//! Inputs shared by the benchmark and the profiling example: the fixture corpus, realistic
//! log noise, and large and hostile envelopes built from them. Deterministic, so a profile
//! and a benchmark run measure the same bytes.

// Each includer uses a different part of this module.
#![allow(dead_code)]

use chrono::{DateTime, Utc};
use classifier::{
    envelope::{AcpUpdate, EvidenceItem},
    Envelope,
};
use serde_json::json;
use std::path::Path;

/// A needle that never occurs, so memmem must look at every byte.
pub(crate) const NEEDLE: &[u8] = b"\x00never-present-needle\x00";

pub(crate) struct Corpus {
    pub(crate) raw: Vec<Vec<u8>>,
    /// The same envelopes parsed (owning their texts).
    pub(crate) envelopes: Vec<Envelope<'static>>,
    pub(crate) bytes: u64,
}

pub(crate) fn corpus() -> Corpus {
    fn walk(dir: &Path, out: &mut Vec<Vec<u8>>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("fixtures").flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                let doc: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
                out.push(serde_json::to_vec(&doc["input"]).expect("envelope bytes"));
            }
        }
    }
    let mut raw = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/classifier"),
        &mut raw,
    );
    let envelopes = raw
        .iter()
        .map(|b| Envelope::parse(b).expect("envelope").into_owned())
        .collect();
    let bytes = raw.iter().map(|b| b.len() as u64).sum();
    Corpus {
        raw,
        envelopes,
        bytes,
    }
}

/// 2026-11-30T08:00:00Z, built without parsing so the loops measure only the classifier.
pub(crate) fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_796_025_600, 0).expect("now")
}

/// Deterministic, realistic log noise: timestamps, levels, paths, numbers, ordinary words
/// (some of which, like `request`, `model` or `error`, also occur in catalogue literals).
pub(crate) fn noise(bytes: usize, seed: u64) -> Vec<String> {
    const WORDS: &[&str] = &[
        "request",
        "model",
        "stream",
        "tokens",
        "session",
        "worker",
        "cache",
        "retrying",
        "connected",
        "handshake",
        "upstream",
        "latency",
        "chunk",
        "prompt",
        "tool",
        "completed",
        "queued",
        "file",
        "reading",
        "writing",
        "error",
        "ok",
        "limit",
        "config",
        "loaded",
        "user",
        "agent",
        "context",
        "bytes",
        "ms",
        "status",
        "path",
        "the",
        "a",
        "of",
        "for",
        "with",
        "and",
        "to",
        "in",
    ];
    const LEVELS: &[&str] = &["DEBUG", "INFO ", "INFO ", "INFO ", "WARN "];
    let mut x = seed | 1;
    let mut next = move || {
        // xorshift64: reproducible, no dependency.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut lines = Vec::new();
    let mut total = 0;
    while total < bytes {
        let r = next();
        let mut line = format!(
            "2026-11-30T07:{:02}:{:02}.{:03}Z {} [worker-{}] ",
            r % 60,
            (r >> 8) % 60,
            (r >> 16) % 1000,
            LEVELS[(r >> 26) as usize % LEVELS.len()],
            (r >> 30) % 8
        );
        for _ in 0..(6 + next() % 10) {
            line.push_str(WORDS[next() as usize % WORDS.len()]);
            line.push(' ');
        }
        let r = next();
        line.push_str(&format!(
            "path=/v1/messages/{} took={}ms status=200",
            r % 100_000,
            (r >> 20) % 900
        ));
        total += line.len() + 1;
        lines.push(line);
    }
    lines
}

pub(crate) const ERROR_JSON: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

/// One stderr item of about `bytes` of noise lines, the provider error last.
pub(crate) fn stderr_envelope(bytes: usize) -> Vec<u8> {
    let mut lines = noise(bytes, 7);
    lines.push(format!("API Error: 529 {ERROR_JSON}"));
    let env = json!({"provider_id": "anthropic", "agent": "claude-code",
        "items": [{"kind": "stderr", "lines": lines}, {"kind": "process_exit", "code": 1}]});
    serde_json::to_vec(&env).expect("envelope")
}

/// One HTTP 529 response whose body is about `bytes` of noise with the error JSON at the end.
pub(crate) fn http_envelope(bytes: usize) -> Vec<u8> {
    let mut body = noise(bytes, 11).join("\n");
    body.push('\n');
    body.push_str(ERROR_JSON);
    let env = json!({"provider_id": "anthropic",
        "items": [{"kind": "http", "status": 529, "headers": {"content-type": "text/plain"}, "body": body}]});
    serde_json::to_vec(&env).expect("envelope")
}

/// One run of agent message chunks (1 KiB each, so none is cut) totalling about `bytes`,
/// ending with the error the agent printed.
pub(crate) fn message_envelope(bytes: usize) -> Vec<u8> {
    message_run(&noise(bytes, 13).join("\n"))
}

/// The hostile case for the same sizes: a message run made of every fixture envelope's JSON,
/// repeated. Nearly every literal of the catalogue occurs, so every rule becomes a candidate,
/// its regex and JSON conditions run, and the scan reports a match every few bytes.
pub(crate) fn errors_envelope(corpus: &Corpus, bytes: usize) -> Vec<u8> {
    let mut text = String::new();
    for r in corpus.raw.iter().cycle() {
        if text.len() >= bytes {
            break;
        }
        text.push_str(std::str::from_utf8(r).expect("utf-8"));
        text.push('\n');
    }
    message_run(&text)
}

/// One run of agent message chunks (1 KiB each, so none is cut) holding `text`, ending with
/// the error the agent printed.
pub(crate) fn message_run(text: &str) -> Vec<u8> {
    let mut updates: Vec<serde_json::Value> = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(1024);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        updates.push(json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": &rest[..cut]}}));
        rest = &rest[cut..];
    }
    updates.push(json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": format!("\nAPI Error: 529 {ERROR_JSON}")}}));
    let env = json!({"provider_id": "anthropic", "agent": "claude-code",
        "items": [{"kind": "acp_updates", "updates": updates, "prompt_result": {"stopReason": "end_turn"}}]});
    serde_json::to_vec(&env).expect("envelope")
}

/// Bytes of evidence text the envelope kept (what classify scans), after the bounds.
pub(crate) fn kept_bytes(e: &Envelope) -> usize {
    e.items
        .iter()
        .map(|i| match i {
            EvidenceItem::Http(h) => h.body.as_ref().map_or(0, |b| b.len()),
            EvidenceItem::Stderr(s) => s.lines.iter().map(|l| l.len()).sum(),
            EvidenceItem::AcpUpdates(u) => u
                .updates
                .iter()
                .map(|x| match x {
                    AcpUpdate::AgentMessageChunk { text } | AcpUpdate::AgentThoughtChunk { text } => {
                        text.len()
                    }
                    _ => 0,
                })
                .sum(),
            EvidenceItem::AcpError(a) => a.message.as_ref().map_or(0, |m| m.len()),
            EvidenceItem::ProcessExit(_) => 0,
        })
        .sum()
}

/// The evidence texts of every fixture envelope, one per item, as redaction sees them: an
/// HTTP body, the stderr lines joined, an ACP error's message, a run of message chunks.
pub(crate) fn evidence_texts(corpus: &Corpus) -> Vec<String> {
    corpus
        .envelopes
        .iter()
        .flat_map(|e| &e.items)
        .map(item_text)
        .filter(|t| !t.is_empty())
        .map(std::borrow::Cow::into_owned)
        .collect()
}

/// The evidence text of one item, as redaction sees it (see [`evidence_texts`]).
pub(crate) fn item_text<'e>(item: &'e EvidenceItem<'_>) -> std::borrow::Cow<'e, str> {
    use std::borrow::Cow;
    match item {
        EvidenceItem::Http(h) => h.body.as_deref().map_or(Cow::Borrowed(""), Cow::Borrowed),
        EvidenceItem::Stderr(s) => Cow::Owned(s.lines.join("\n")),
        EvidenceItem::AcpError(a) => a.message.as_deref().map_or(Cow::Borrowed(""), Cow::Borrowed),
        EvidenceItem::AcpUpdates(u) => Cow::Owned(
            u.updates
                .iter()
                .filter_map(|x| match x {
                    AcpUpdate::AgentMessageChunk { text } => Some(&**text),
                    _ => None,
                })
                .collect(),
        ),
        EvidenceItem::ProcessExit(_) => Cow::Borrowed(""),
    }
}

/// The floor under the pipeline for one envelope's bytes: the parse, the literal scan of every
/// evidence text and the excerpt of the first one, without a rule (the bench and the profile
/// example measure the same work).
pub(crate) fn floor(cat: &classifier::Catalogue, raw: &[u8]) {
    use std::hint::black_box;
    let Ok(e) = Envelope::parse(black_box(raw)) else {
        return;
    };
    let mut excerpted = false;
    for item in &e.items {
        let t = item_text(item);
        if t.is_empty() {
            continue;
        }
        black_box(cat.scan_literals(t.as_bytes()));
        if !excerpted {
            black_box(classifier::redact::safe_excerpt(&t));
            excerpted = true;
        }
    }
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) raw: Vec<u8>,
    pub(crate) env: Envelope<'static>,
}

impl Case {
    pub(crate) fn new(name: &'static str, raw: Vec<u8>) -> Case {
        let env = Envelope::parse(&raw).expect("envelope").into_owned();
        Case { name, raw, env }
    }
}

/// Noise bytes that keep a "1 MiB" envelope (noise plus its JSON framing) within
/// [`classifier::envelope::MAX_ENVELOPE_BYTES`], so it is read, not refused.
pub(crate) const NEAR_1_MIB: usize = 1024 * 1024 - 48 * 1024;

/// Large stderr items and HTTP bodies. Their bounds apply: a stderr item keeps its last 64
/// lines and a body its first 16 KiB (the verdict says `truncated`).
pub(crate) fn large_cases() -> Vec<Case> {
    vec![
        Case::new("stderr_64k", stderr_envelope(64 * 1024)),
        Case::new("stderr_1m", stderr_envelope(NEAR_1_MIB)),
        Case::new("http_64k", http_envelope(64 * 1024)),
        Case::new("http_1m", http_envelope(NEAR_1_MIB)),
    ]
}

/// A message run of ordinary words that share little with the catalogue's vocabulary (unlike
/// [`noise`], which is made of words such as `request`, `tokens` and `error` on purpose): the
/// scan's floor, where the filter almost never asks for a comparison.
pub(crate) fn plain_envelope(bytes: usize) -> Vec<u8> {
    message_run(&plain_text(bytes))
}

/// About `bytes` of ordinary words outside the catalogue's vocabulary.
pub(crate) fn plain_text(bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "garden", "window", "yellow", "bicycle", "harbor", "velvet", "puzzle", "orchard", "lantern",
        "meadow", "copper", "violin", "glacier", "pebble", "thunder", "maple", "saddle", "jigsaw",
    ];
    let mut x: u64 = 0x9E37_79B9;
    let mut text = String::new();
    while text.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
        text.push(if x.is_multiple_of(11) { '\n' } else { ' ' });
    }
    text
}

pub(crate) fn linear_cases(corpus: &Corpus) -> Vec<Case> {
    vec![
        Case::new("plain_16k", plain_envelope(16 * 1024)),
        Case::new("plain_256k", plain_envelope(256 * 1024)),
        Case::new("message_16k", message_envelope(16 * 1024)),
        Case::new("message_64k", message_envelope(64 * 1024)),
        Case::new("message_256k", message_envelope(256 * 1024)),
        Case::new("errors_16k", errors_envelope(corpus, 16 * 1024)),
        Case::new("errors_64k", errors_envelope(corpus, 64 * 1024)),
        Case::new("errors_256k", errors_envelope(corpus, 256 * 1024)),
    ]
}
