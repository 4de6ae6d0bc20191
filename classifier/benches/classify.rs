//! Classifier throughput over every fixture, with a plain `memchr::memmem` scan of the same
//! bytes as the yardstick (the cost floor of looking at each byte once).
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench -p classifier`. Besides criterion's estimates it
//! prints a summary: median time per envelope, MB/s for classify and for the yardstick, and the
//! per-byte ratio between them.

use chrono::{DateTime, Utc};
use classifier::{Catalogue, Envelope};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::{
    path::Path,
    time::{Duration, Instant},
};

struct Corpus {
    raw: Vec<Vec<u8>>,
    envelopes: Vec<Envelope>,
    bytes: u64,
}

fn corpus() -> Corpus {
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
        .map(|b| Envelope::parse(b).expect("envelope"))
        .collect();
    let bytes = raw.iter().map(|b| b.len() as u64).sum();
    Corpus {
        raw,
        envelopes,
        bytes,
    }
}

/// 2026-11-30T08:00:00Z, built without parsing so the loops measure only the classifier.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_796_025_600, 0).expect("now")
}

/// A needle that never occurs, so memmem must look at every byte.
const NEEDLE: &[u8] = b"\x00never-present-needle\x00";

fn benches(c: &mut Criterion) {
    let cat = Catalogue::builtin();
    let corpus = corpus();
    let finder = memchr::memmem::Finder::new(NEEDLE);
    let mut g = c.benchmark_group("all_fixtures");
    g.throughput(Throughput::Bytes(corpus.bytes));
    g.bench_function("classify", |b| {
        b.iter(|| {
            for e in &corpus.envelopes {
                black_box(cat.classify(black_box(e), now()));
            }
        })
    });
    g.bench_function("parse_and_classify", |b| {
        b.iter(|| {
            for r in &corpus.raw {
                let e = Envelope::parse(black_box(r)).expect("envelope");
                black_box(cat.classify(&e, now()));
            }
        })
    });
    g.bench_function("memmem_yardstick", |b| {
        b.iter(|| {
            for r in &corpus.raw {
                black_box(finder.find(black_box(r)));
            }
        })
    });
    g.finish();
    summary(cat, &corpus, &finder);
}

/// Median of per-envelope times, and whole-corpus rates, measured directly.
fn summary(cat: &Catalogue, corpus: &Corpus, finder: &memchr::memmem::Finder<'_>) {
    const REPS: u32 = 200;
    let mut per_env: Vec<Duration> = corpus
        .envelopes
        .iter()
        .map(|e| {
            let t = Instant::now();
            for _ in 0..REPS {
                black_box(cat.classify(black_box(e), now()));
            }
            t.elapsed() / REPS
        })
        .collect();
    per_env.sort();
    let median = per_env[per_env.len() / 2];
    let p90 = per_env[per_env.len() * 9 / 10];
    let small: Vec<Duration> = corpus
        .raw
        .iter()
        .zip(&corpus.envelopes)
        .filter(|(r, _)| r.len() <= 2048)
        .map(|(_, e)| {
            let t = Instant::now();
            for _ in 0..REPS {
                black_box(cat.classify(black_box(e), now()));
            }
            t.elapsed() / REPS
        })
        .collect();
    let mut small_sorted = small.clone();
    small_sorted.sort();
    let small_median = small_sorted[small_sorted.len() / 2];

    let rate = |f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..50 {
            f();
        }
        let secs = t.elapsed().as_secs_f64() / 50.0;
        (corpus.bytes as f64 / secs / 1e6, secs)
    };
    let (classify_mbs, classify_s) = rate(&|| {
        for e in &corpus.envelopes {
            black_box(cat.classify(black_box(e), now()));
        }
    });
    let (memmem_mbs, memmem_s) = rate(&|| {
        for r in &corpus.raw {
            black_box(finder.find(black_box(r)));
        }
    });
    println!(
        "\nclassifier summary ({} fixtures, {} bytes of envelope JSON):",
        corpus.raw.len(),
        corpus.bytes
    );
    println!(
        "  median per envelope: {median:?} (p90 {p90:?}); envelopes <= 2 KB ({}): median {small_median:?}",
        small.len()
    );
    println!(
        "  classify: {classify_mbs:.1} MB/s ({:.1} us for the corpus)",
        classify_s * 1e6
    );
    println!(
        "  memmem yardstick: {memmem_mbs:.1} MB/s ({:.1} us for the corpus)",
        memmem_s * 1e6
    );
    println!("  classify / memmem cost per byte: {:.1}x", classify_s / memmem_s);
}

criterion_group!(classify_benches, benches);
criterion_main!(classify_benches);
