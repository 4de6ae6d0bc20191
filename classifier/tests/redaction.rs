//! Redaction against an adversary, end to end through the classifier: every secret shape of
//! the corpus (`tests/corpus`) in every evidence position, classified, must leave no stretch
//! of the secret in any field of the result (`safe_excerpt`, `provider_id`, `model_id`, and
//! everything else the classification carries).

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
    let leaks: Vec<String> = secrets
        .iter()
        .filter(|s| !corpus::leaks(s, &out).is_empty())
        .map(|s| s.name.to_owned())
        .collect();
    assert!(leaks.is_empty(), "{leaks:?}");
}
