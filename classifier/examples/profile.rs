//! Runs one stage of the classifier on one benchmark input a fixed number of times, so an
//! instruction-count profiler (which a busy machine cannot disturb) can say where the cost
//! goes:
//!
//! ```text
//! cargo build --profile bench -p classifier --example profile
//! valgrind --tool=callgrind target/release/examples/profile CASE STAGE ITERS
//! ```
//!
//! CASE is `corpus` (every fixture) or a benchmark input (`stderr_64k`, `http_1m`, ...);
//! STAGE is `parse` (JSON bytes to a bounded envelope), `classify` (a parsed envelope to a
//! verdict), `both`, `floor` (parse, literal scan of every evidence text and one excerpt per
//! envelope, no rule: the bench's floor under goal 1), `serde` (`serde_json` parsing the bytes
//! into a `Value`, the pipeline's yardstick) or `memmem`. The inputs are the benchmark's own.

#[path = "../benches/common/mod.rs"]
mod common;

use classifier::{Catalogue, Envelope};
use common::{Case, NEEDLE};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(case), Some(stage)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: profile CASE parse|classify|both|floor|serde|memmem [ITERS]");
        std::process::exit(2);
    };
    let iters: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10);
    let corpus = common::corpus();
    let cases: Vec<Case> = if case == "corpus" {
        corpus
            .raw
            .iter()
            .map(|r| Case::new("corpus", r.clone()))
            .collect()
    } else {
        common::large_cases()
            .into_iter()
            .chain(common::linear_cases(&corpus))
            .filter(|c| c.name == case)
            .collect()
    };
    if cases.is_empty() {
        eprintln!("unknown case `{case}`");
        std::process::exit(2);
    }
    let cat = Catalogue::builtin();
    let finder = memchr::memmem::Finder::new(NEEDLE);
    // One untimed pass compiles the lazily built regexes, so the profile holds only the
    // per-call work (`--toggle-collect='*measured*'` collects inside `measured` only).
    run(stage, &cases, cat, &finder);
    measured(iters, stage, &cases, cat, &finder);
}

#[inline(never)]
fn measured(iters: usize, stage: &str, cases: &[Case], cat: &Catalogue, finder: &memchr::memmem::Finder<'_>) {
    for _ in 0..iters {
        run(stage, cases, cat, finder);
    }
}

fn run(stage: &str, cases: &[Case], cat: &Catalogue, finder: &memchr::memmem::Finder<'_>) {
    let now = common::now();
    for c in cases {
        match stage {
            "parse" => {
                black_box(Envelope::parse(black_box(&c.raw)).ok());
            }
            "classify" => {
                black_box(cat.classify(black_box(&c.env), now));
            }
            "both" => {
                if let Ok(e) = Envelope::parse(black_box(&c.raw)) {
                    black_box(cat.classify(&e, now));
                }
            }
            "floor" => common::floor(cat, &c.raw),
            "serde" => {
                black_box(serde_json::from_slice::<serde_json::Value>(black_box(&c.raw)).ok());
            }
            "memmem" => {
                black_box(finder.find(black_box(&c.raw)));
            }
            other => {
                eprintln!("unknown stage `{other}`");
                std::process::exit(2);
            }
        }
    }
}
