//! Redaction against an adversary, end to end through the classifier: every secret shape of
//! the corpus (`tests/corpus`) in every evidence position, classified, must leave no stretch
//! of the secret in any field of the result (`safe_excerpt`, `provider_id`, `model_id`, and
//! everything else the classification carries).

#[path = "../corpus/mod.rs"]
mod corpus;

use chrono::{DateTime, Utc};
use classifier::{cli::classify_stream, Envelope};

fn now() -> DateTime<Utc> {
    "2026-11-30T08:00:00Z".parse().expect("now")
}

#[test]
fn the_corpus_is_at_least_a_hundred_shapes_in_fifteen_positions() {
    let secrets = corpus::secrets();
    let positions = corpus::positions();
    assert!(secrets.len() >= 100, "{} shapes", secrets.len());
    assert!(positions.len() >= 15, "{} positions", positions.len());
    let mut names: Vec<&str> = secrets.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), secrets.len(), "shape names are unique");
}

#[test]
fn no_secret_shape_leaks_from_any_evidence_position() {
    let secrets = corpus::secrets();
    let positions = corpus::positions();
    let mut leaks = Vec::new();
    let mut checked = 0;
    for secret in &secrets {
        for position in &positions {
            let envelope = (position.build)(&secret.text);
            let bytes = serde_json::to_vec(&envelope).expect("envelope bytes");
            // Sanity: the secret really is in the evidence (once JSON escapes are undone), so a
            // clean result means something. Split chunks hold it in two halves.
            let raw = String::from_utf8_lossy(&bytes)
                .replace("\\\\", "\\")
                .replace("\\\"", "\"");
            assert!(
                position.name == "acp-update-split-chunks" || !corpus::leaks(secret, &raw).is_empty(),
                "{} is not in {}",
                secret.name,
                position.name
            );
            let env = Envelope::parse(&bytes).expect("envelope parses");
            let verdict = classifier::classify(&env, now());
            let out = serde_json::to_string(&verdict).expect("verdict JSON");
            let found = corpus::leaks(secret, &out);
            if !found.is_empty() {
                leaks.push(format!(
                    "{} in {}: {:?} -> excerpt {:?}",
                    secret.name, position.name, found, verdict.classification.safe_excerpt
                ));
            }
            checked += 1;
        }
    }
    println!(
        "redaction corpus: {} shapes x {} positions = {checked} envelopes, {} leak(s)",
        secrets.len(),
        positions.len(),
        leaks.len()
    );
    assert!(leaks.is_empty(), "{} leak(s):\n{}", leaks.len(), leaks.join("\n"));
}

#[test]
fn the_command_line_leaks_nothing_either() {
    // `recourse classify` streams the same verdicts; its error lines never echo input.
    let secrets = corpus::secrets();
    let positions = corpus::positions();
    let mut input = Vec::new();
    for secret in &secrets {
        for position in &positions {
            serde_json::to_writer(&mut input, &(position.build)(&secret.text)).expect("write");
            input.push(b'\n');
        }
        // A malformed line holding the secret gets an error line that does not echo it.
        input.extend_from_slice(format!("{{\"items\": [{}\n", secret.text.replace('\n', " ")).as_bytes());
    }
    let mut out = Vec::new();
    classify_stream(&input[..], &mut out, now()).expect("stream");
    let out = String::from_utf8(out).expect("utf-8");
    let stretches = corpus::Stretches::of(&out);
    let leaks: Vec<String> = secrets
        .iter()
        .filter(|s| !corpus::leaks_in(s, &stretches).is_empty())
        .map(|s| s.name.to_owned())
        .collect();
    assert!(leaks.is_empty(), "{leaks:?}");
}

/// xorshift64*, seeded: the property test below is the same on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Unpadded base64url of `bytes`, as the server's `URL_SAFE_NO_PAD` writes it.
fn base64url(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for k in 0..=chunk.len() {
            out.push(B64URL[((n >> (18 - 6 * k)) & 63) as usize] as char);
        }
    }
    out
}

/// A Recourse API token made as `server/src/auth/token.rs` makes one: `rct_` and 32 random
/// bytes in unpadded base64url (43 characters).
fn recourse_token(r: &mut XorShift) -> String {
    let bytes: Vec<u8> = (0..32).map(|_| r.next().to_le_bytes()[3]).collect();
    format!("rct_{}", base64url(&bytes))
}

/// Every place `secret` is tried: a stderr line, a plain HTTP body, and a JSON string (a
/// body's message and a value of its own).
fn verdicts_holding(secret: &str) -> Vec<(&'static str, String)> {
    let envelopes = [
        (
            "stderr",
            serde_json::json!({"items": [{"kind": "stderr", "lines": [format!("request failed {secret}")]}]}),
        ),
        (
            "http-body",
            serde_json::json!({"items": [{"kind": "http", "status": 401, "body": format!("rejected {secret} for this request")}]}),
        ),
        (
            "json-string",
            serde_json::json!({"items": [{"kind": "http", "status": 401, "body": serde_json::json!({"error": {"message": format!("bad credential {secret}"), "id": secret}}).to_string()}]}),
        ),
    ];
    envelopes
        .into_iter()
        .map(|(name, value)| {
            let bytes = serde_json::to_vec(&value).expect("bytes");
            let env = Envelope::parse(&bytes).expect("envelope");
            let v = classifier::classify(&env, now());
            (name, serde_json::to_string(&v).expect("verdict"))
        })
        .collect()
}

#[test]
fn recourse_tokens_and_random_base64url_never_leak() {
    let mut r = XorShift(0x00C0_FFEE_0012_2026);
    let mut secrets: Vec<String> = (0..2000).map(|_| recourse_token(&mut r)).collect();
    for i in 0..2000 {
        let len = 20 + i % 45;
        secrets.push(
            (0..len)
                .map(|_| B64URL[(r.next() % 64) as usize] as char)
                .collect(),
        );
    }
    let mut leaks = Vec::new();
    for s in &secrets {
        let part = s.strip_prefix("rct_").unwrap_or(s);
        let chars: Vec<char> = part.chars().collect();
        for (position, out) in verdicts_holding(s) {
            if let Some(w) = chars
                .windows(corpus::WINDOW)
                .map(|w| w.iter().collect::<String>())
                .find(|w| out.contains(w.as_str()))
            {
                leaks.push(format!("{s} in {position}: {w:?}"));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leak(s) of {} secrets, e.g.:\n{}",
        leaks.len(),
        secrets.len(),
        leaks
            .iter()
            .step_by(3)
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn ordinary_identifiers_agents_print_are_kept() {
    for id in [
        "claude-sonnet-4-5-20250929",
        "gemini-2.5-pro",
        "provider_overloaded",
        "rate_limit_exceeded",
        "Mixtral-8x7B-Instruct-v0",
        "X-RateLimit-Remaining",
        "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        "run-sendMessageStream-2025-07-23T09-10-46-934Z",
        "/T/gemini-client-error-Turn",
        "AI_TypeValidationError",
        "/path/to/project/test",
        "deepseek/deepseek-chat-v3-0324",
        "words-joined-with-dashes",
        "/opt/homebrew/lib/node_modules/npm/bin/npm-cli.js",
        "/usr/local/lib/python3.12/site-packages/anthropic/_base_client.py",
        "generativelanguage.googleapis.com",
        "cloudresourcemanager",
        "2026-11-30T08:00:00Z",
        "v20.11.1",
        "10.0.0.12:8080",
        "14.036s",
        "1m30s",
        "status 429 500 503",
    ] {
        let text = format!("failed with {id} here");
        assert_eq!(classifier::redact::redact(&text), text, "{id}");
    }
}
