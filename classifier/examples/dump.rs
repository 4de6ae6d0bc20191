//! Prints everything the classifier answers for the benchmark's inputs, one line each, so a
//! change meant only to make it faster can be checked to change nothing:
//!
//! ```text
//! cargo run --release -p classifier --example dump > before.txt
//! # ... change the code ...
//! cargo run --release -p classifier --example dump > after.txt && diff before.txt after.txt
//! ```
//!
//! Lines: the verdict (as `recourse classify` writes it) of every fixture envelope and every
//! large and hostile benchmark envelope, at the benchmark's fixed time; `safe_excerpt` of every
//! fixture evidence text; `redact` of the scan texts and of each evidence text in full; and how
//! many literals the scan finds in each scan text.

#[path = "../benches/common/mod.rs"]
mod common;

use classifier::{redact, Catalogue, Envelope};

fn main() {
    let cat = Catalogue::builtin();
    let now = common::now();
    let corpus = common::corpus();
    for (i, r) in corpus.raw.iter().enumerate() {
        let e = Envelope::parse(r).expect("envelope");
        let v = serde_json::to_string(&cat.classify(&e, now)).expect("verdict");
        println!("corpus {i}: {v}");
    }
    for c in common::large_cases()
        .into_iter()
        .chain(common::linear_cases(&corpus))
    {
        let e = Envelope::parse(&c.raw).expect("envelope");
        assert_eq!(e, c.env);
        let v = serde_json::to_string(&cat.classify(&e, now)).expect("verdict");
        println!("case {}: {v}", c.name);
    }
    for (i, t) in common::evidence_texts(&corpus).iter().enumerate() {
        println!("excerpt {i}: {:?}", redact::safe_excerpt(t));
        println!("redact {i}: {:?}", redact::redact(t));
    }
    let texts: Vec<(&str, Vec<u8>)> = vec![
        (
            "log_noise_64k",
            common::noise(64 * 1024, 3).join("\n").into_bytes(),
        ),
        ("plain_words_64k", common::plain_text(64 * 1024).into_bytes()),
        ("fixture_text_64k", {
            let mut errors = Vec::new();
            for r in corpus.raw.iter().cycle() {
                if errors.len() >= 64 * 1024 {
                    break;
                }
                errors.extend_from_slice(r);
                errors.push(b'\n');
            }
            errors
        }),
    ];
    for (name, t) in &texts {
        println!("scan {name}: {}", cat.scan_literals(t));
        let text = std::str::from_utf8(t).expect("utf-8");
        println!("redact {name}: {:?}", redact::redact(text));
        println!("excerpt {name}: {:?}", redact::safe_excerpt(text));
    }
}
