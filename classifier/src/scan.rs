//! The literal scan: where each catalogue literal first occurs in a signal's text.
//!
//! This is the classifier's only per-byte work on large evidence (bodies, long message runs),
//! so it is built for that: the aim is a cost per byte within a small factor of a plain
//! `memchr::memmem` search. Hundreds of case-insensitive literals are too many for a SIMD
//! fingerprint search (Teddy degrades past a few dozen patterns), and a DFA step depends on
//! the previous one, so it is bound by memory latency. The scan is therefore a *gram filter*
//! whose per-position work is independent from one position to the next:
//!
//! - Every literal is at least [`MIN_GRAM_LITERAL`] (5) bytes long. For each literal one
//!   5-byte window `[j, j + 5)` is chosen whose two 4-byte grams are least likely in ordinary
//!   text (so `status code 407` is looked for by `e 407`, not by `atus`, which every log
//!   has; see `gram_cost`); an occurrence starting at `s` puts the window's 4-byte grams at
//!   `s + j` and `s + j + 1`, one of which is even.
//!   The filter therefore reads the 4 bytes at every *even* position (eight per 16 bytes),
//!   folds them (`| 0x20` on each byte: ASCII case folding, plus a few harmless extra
//!   collisions), hashes them to 16 bits and reads one byte of a 64 KiB table that marks the
//!   hashes of every literal's two grams. Eight positions are tested with one branch.
//! - A marked position is verified exactly. First a second table (a bit set of 8 KiB, read only
//!   here, so it stays in cache between the short texts of many envelopes), of the literals'
//!   5-byte windows, says whether the window that would contain this gram (starting here or one byte
//!   earlier) is one at all; most word-boundary grams of ordinary text stop there. Then the
//!   (few) literals whose gram has that hash are compared, ASCII case-insensitively, at the
//!   start the gram implies. A literal already found is not compared again: only first
//!   offsets matter.
//!
//! Positions are visited in increasing order, and at one position a literal's gram at `j + 1`
//! (the earlier start) is checked before its gram at `j`, so the first occurrence recorded
//! is the first in the text. The work per position is bounded (bucket size times literal
//! length, both fixed by the catalogue), so time is linear in the text whatever it contains.
//!
//! A catalogue with a literal shorter than [`MIN_GRAM_LITERAL`] bytes falls back to an
//! Aho-Corasick DFA (the `aho-corasick` crate's, copied into a compact table and scanned as
//! interleaved segments): slower, equally exact.

use crate::engine::Found;
use aho_corasick::{automaton::Automaton, dfa, Anchored, MatchKind};
use std::collections::HashMap;

/// The shortest literal the gram filter can find (a 4-byte gram at offset 0 or 1).
pub(crate) const MIN_GRAM_LITERAL: usize = 5;
/// Bits of a gram's hash; the filter table has `2^HASH_BITS` one-byte entries (64 KiB: a
/// byte load and an OR per position, cheaper than a bit test).
const HASH_BITS: u32 = 16;
/// Bits of the bucket index (the hash's high bits) in the verification table.
const BUCKET_BITS: u32 = 12;
/// `| FOLD` on four bytes maps ASCII upper-case letters to lower-case ones.
const FOLD: u32 = 0x2020_2020;

/// Finds every catalogue literal's first offset in a text. Immutable; shared by reference
/// through the catalogue.
#[derive(Clone, Debug)]
pub(crate) struct LiteralScanner(Scan);

#[derive(Clone, Debug)]
enum Scan {
    Grams(Box<Grams>),
    Dfa(Box<Dfa>),
}

impl LiteralScanner {
    /// Compiles the (lower-cased) literal table.
    pub(crate) fn new(literals: &[String]) -> Result<LiteralScanner, String> {
        if literals.iter().all(|l| l.len() >= MIN_GRAM_LITERAL) {
            Ok(LiteralScanner(Scan::Grams(Box::new(Grams::new(literals)?))))
        } else {
            LiteralScanner::dfa(literals)
        }
    }

    /// The DFA scanner, whatever the literals (the fallback; tests compare both).
    pub(crate) fn dfa(literals: &[String]) -> Result<LiteralScanner, String> {
        Ok(LiteralScanner(Scan::Dfa(Box::new(Dfa::new(literals)?))))
    }

    /// Records in `found` every literal occurring in `hay`, at its first offset.
    pub(crate) fn scan(&self, hay: &[u8], found: &mut Found) {
        match &self.0 {
            Scan::Grams(g) => g.scan(hay, found),
            Scan::Dfa(d) => d.scan(hay, found),
        }
    }
}

/// The gram filter (see the module documentation).
#[derive(Clone)]
struct Grams {
    /// Entry `h` is 1 when some literal's chosen folded gram (at `j` or `j + 1`) hashes to
    /// `h`, else 0.
    table: Box<[u8; 1 << HASH_BITS]>,
    /// Entries of bucket `b` (the hash's high [`BUCKET_BITS`] bits) are
    /// `entries[bucket_at[b]..bucket_at[b + 1]]`.
    bucket_at: Vec<u32>,
    entries: Vec<GramEntry>,
    /// The literals, lower-cased.
    literals: Vec<Box<[u8]>>,
    /// Each literal's first 8 bytes folded, and the mask of the bytes it has (a cheap first
    /// comparison before the exact one).
    heads: Vec<(u64, u64)>,
    /// Bit `h` is set when some literal's chosen 5-byte window, folded, hashes to `h`: a
    /// second, sharper filter run on a gram hit before any literal is compared.
    windows: Box<[u64; (1 << HASH_BITS) / 64]>,
}

/// One literal's gram in the verification table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GramEntry {
    bucket: u32,
    hash: u32,
    literal: u32,
    /// `u8::MAX - back`: entries of one literal sort by decreasing `back` (see `Grams::new`).
    order: u8,
    /// The gram's offset in the literal: a gram seen at `p` means a start at `p - back`.
    back: u8,
}

impl std::fmt::Debug for Grams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grams")
            .field("literals", &self.literals.len())
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

#[inline(always)]
fn gram_hash(gram: u32) -> u32 {
    folded_hash(gram | FOLD)
}

/// [`gram_hash`] of a gram already folded.
#[inline(always)]
fn folded_hash(gram: u32) -> u32 {
    gram.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)
}

/// A rough rank of how common a (folded) byte is in logs and prose: higher is more common.
/// Letters rank above everything else as a class (a window inside a plain word, like `atus`,
/// recurs in every log), then by English letter frequency; digits and punctuation mark the
/// parts of a message that ordinary text rarely repeats. Used only to pick which part of a
/// literal the filter looks for; never affects results.
fn commonness(b: u8) -> u32 {
    const LETTERS: &[u8] = b"etaoinsrhldcumfpgwybvkxjqz";
    match b {
        b' ' => 260,
        b'a'..=b'z' => 250 - 2 * LETTERS.iter().position(|&l| l == b).unwrap_or(25) as u32,
        b'0'..=b'9' => 150,
        b'\n' | b'.' | b'/' | b':' | b'-' | b'=' | b'"' | b',' | b'_' => 140,
        0x80.. => 60,
        _ => 100,
    }
}

/// How often a gram is expected in ordinary text: the commonness of its bytes, and much more
/// for four letters (the inside of a word, like `atus` of every `status`).
fn gram_cost(gram: &[u8]) -> u32 {
    let folded = gram.iter().map(|&c| c | 0x20);
    let letters = folded.clone().all(|c| c.is_ascii_lowercase());
    folded.map(commonness).sum::<u32>() + if letters { 400 } else { 0 }
}

/// The hash of a 5-byte window, folded like grams.
fn window_hash(w: &[u8]) -> u32 {
    let v = w
        .iter()
        .take(MIN_GRAM_LITERAL)
        .enumerate()
        .fold(0u64, |v, (k, &c)| v | u64::from(c | 0x20) << (8 * k));
    packed_window_hash(v)
}

/// [`window_hash`] of folded bytes read as a little-endian word (bytes past the fifth ignored).
#[inline(always)]
fn packed_window_hash(v: u64) -> u32 {
    ((v & 0xff_ffff_ffff).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - HASH_BITS)) as u32
}

impl Grams {
    fn new(literals: &[String]) -> Result<Grams, String> {
        let mut table = Box::new([0u8; 1 << HASH_BITS]);
        let mut entries = Vec::new();
        let mut heads = Vec::new();
        let mut windows = Box::new([0u64; (1 << HASH_BITS) / 64]);
        for (i, l) in literals.iter().enumerate() {
            let b = l.as_bytes();
            let literal = u32::try_from(i).map_err(|_| "too many literals")?;
            if b.len() < MIN_GRAM_LITERAL || b.len() > usize::from(u8::MAX) {
                return Err("literal length out of the gram filter's range".into());
            }
            // The 5-byte window [j, j + 5) of least common bytes: its grams at j and j + 1 are
            // what the filter looks for. An occurrence at s puts them at s + j and s + j + 1,
            // one of which is even.
            let j = (0..=b.len() - MIN_GRAM_LITERAL)
                .min_by_key(|&j| {
                    let (a, b) = (gram_cost(&b[j..j + 4]), gram_cost(&b[j + 1..j + 5]));
                    (a.max(b), a + b)
                })
                .unwrap_or(0);
            for back in [j + 1, j] {
                let gram = b
                    .get(back..back + 4)
                    .and_then(|g| <[u8; 4]>::try_from(g).ok())
                    .ok_or("literal too short for the gram filter")?;
                let hash = gram_hash(u32::from_le_bytes(gram));
                table[hash as usize] = 1;
                let back = u8::try_from(back).map_err(|_| "literal too long")?;
                entries.push(GramEntry {
                    bucket: hash >> (HASH_BITS - BUCKET_BITS),
                    hash,
                    literal,
                    order: u8::MAX - back,
                    back,
                });
            }
            let mut head = [0u8; 8];
            let mut mask = [0u8; 8];
            for (k, &c) in b.iter().take(8).enumerate() {
                head[k] = c | 0x20;
                mask[k] = 0xff;
            }
            heads.push((u64::from_le_bytes(head), u64::from_le_bytes(mask)));
            let window = b.get(j..j + MIN_GRAM_LITERAL).ok_or("literal too short")?;
            let h = window_hash(window) as usize;
            windows[h / 64] |= 1 << (h % 64);
        }
        // One literal's entries in decreasing `back`: at one position the larger `back` names
        // the earlier start, so a literal's first recorded occurrence is its first in the text.
        entries.sort_unstable();
        entries.dedup();
        let mut bucket_at = vec![0u32; (1 << BUCKET_BITS) + 1];
        for e in &entries {
            bucket_at[e.bucket as usize + 1] += 1;
        }
        for b in 1..bucket_at.len() {
            bucket_at[b] += bucket_at[b - 1];
        }
        Ok(Grams {
            table,
            bucket_at,
            entries,
            literals: literals.iter().map(|l| l.as_bytes().into()).collect(),
            heads,
            windows,
        })
    }

    #[inline(always)]
    fn hit(&self, hash: u32) -> u8 {
        self.table[hash as usize & ((1 << HASH_BITS) - 1)]
    }

    fn scan(&self, hay: &[u8], found: &mut Found) {
        const FOLD64: u64 = 0x2020_2020_2020_2020;
        // Main loop: 16 bytes per step, folded once as two words; grams at the 8 even
        // positions p, p+2, ..., p+14 (the last reads 2 bytes past the step, hence the
        // 20-byte window). Eight table reads, one branch.
        let mut p = 0;
        while let Some(c) = hay.get(p..p + 20) {
            let word = |at: usize| {
                c.get(at..at + 8)
                    .and_then(|w| <[u8; 8]>::try_from(w).ok())
                    .map_or(0, u64::from_le_bytes)
                    | FOLD64
            };
            let (a, b) = (word(0), word(8));
            let x = c
                .get(16..20)
                .and_then(|w| <[u8; 4]>::try_from(w).ok())
                .map_or(0, |w| u64::from(u32::from_le_bytes(w)))
                | FOLD64;
            let h = [
                folded_hash(a as u32),
                folded_hash((a >> 16) as u32),
                folded_hash((a >> 32) as u32),
                folded_hash(((a >> 48) | (b << 16)) as u32),
                folded_hash(b as u32),
                folded_hash((b >> 16) as u32),
                folded_hash((b >> 32) as u32),
                folded_hash(((b >> 48) | (x << 16)) as u32),
            ];
            let any = h.iter().fold(0, |acc, &h| acc | self.hit(h));
            if any != 0 {
                self.verify_step(hay, p, h, found);
            }
            p += 16;
        }
        // The tail, one even position at a time.
        while let Some(g) = hay.get(p..p + 4).and_then(|g| <[u8; 4]>::try_from(g).ok()) {
            let h = gram_hash(u32::from_le_bytes(g));
            if self.hit(h) != 0 {
                self.verify(hay, p, h, found);
            }
            p += 2;
        }
    }

    /// Verifies the eight positions of one step (rare: kept out of the loop).
    #[cold]
    #[inline(never)]
    fn verify_step(&self, hay: &[u8], p: usize, hashes: [u32; 8], found: &mut Found) {
        for (k, h) in hashes.into_iter().enumerate() {
            if self.hit(h) != 0 {
                self.verify(hay, p + 2 * k, h, found);
            }
        }
    }

    /// Compares the literals whose gram hashes to `hash` at the starts position `p` implies.
    #[inline]
    fn verify(&self, hay: &[u8], p: usize, hash: u32, found: &mut Found) {
        // The gram at `p` is a window's first or second gram: the window starts at `p` or at
        // `p - 1`. If neither 5 bytes are a window, no literal can start here. (Near the ends,
        // where an 8-byte read does not fit, the literals are simply compared.)
        let window_at = |at: usize| {
            let w = hay.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok())?;
            Some(packed_window_hash(u64::from_le_bytes(w) | 0x2020_2020_2020_2020))
        };
        if let (Some(a), Some(b)) = (window_at(p), p.checked_sub(1).and_then(window_at)) {
            let bit = |h: u32| {
                let h = h as usize & ((1 << HASH_BITS) - 1);
                self.windows[h / 64] >> (h % 64) & 1
            };
            if bit(a) | bit(b) == 0 {
                return;
            }
        }
        let b = (hash >> (HASH_BITS - BUCKET_BITS)) as usize;
        let (Some(&from), Some(&to)) = (self.bucket_at.get(b), self.bucket_at.get(b + 1)) else {
            return;
        };
        for e in self.entries.get(from as usize..to as usize).unwrap_or_default() {
            let lit = e.literal as usize;
            if e.hash != hash || found.has(lit) {
                continue;
            }
            let Some(start) = p.checked_sub(usize::from(e.back)) else {
                continue;
            };
            let (Some(l), Some(&(head, mask))) = (self.literals.get(lit), self.heads.get(lit)) else {
                continue;
            };
            if let Some(w) = hay
                .get(start..start + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
            {
                if (u64::from_le_bytes(w) | (u64::from(FOLD) * 0x1_0000_0001)) & mask != head {
                    continue;
                }
            }
            if hay
                .get(start..start + l.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(l))
            {
                found.insert(lit, start);
            }
        }
    }
}

/// Segments scanned in lockstep for long texts (the loop below is written out for four).
const STREAMS: usize = 4;
/// Texts shorter than this are scanned in one pass (splitting would not pay).
const SPLIT_MIN_BYTES: usize = 4096;

/// The literal DFA in a compact table: the fallback for catalogues with literals shorter
/// than [`MIN_GRAM_LITERAL`] bytes, which the gram filter cannot see.
#[derive(Clone)]
struct Dfa {
    /// Byte -> class; bytes that occur in no literal share class 0, letters fold case.
    classes: [u8; 256],
    /// Row width (number of classes).
    stride: usize,
    /// `table[state + class]` is the next state; states are premultiplied by `stride`.
    table: Vec<u32>,
    start: u32,
    /// States at or above this one (a power of two) are match states; all others are below.
    first_match: u32,
    /// For match state `first_match + k * stride`, its literals are
    /// `outputs[output_at[k]..output_at[k + 1]]`, as (literal, length).
    output_at: Vec<u32>,
    outputs: Vec<(u32, u32)>,
    /// The longest literal, in bytes.
    max_len: usize,
}

impl std::fmt::Debug for Dfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dfa")
            .field("table_entries", &self.table.len())
            .field("classes", &self.stride)
            .field("max_len", &self.max_len)
            .finish_non_exhaustive()
    }
}

impl Dfa {
    /// Compiles the (lower-cased) literal table.
    fn new(literals: &[String]) -> Result<Dfa, String> {
        let dfa = dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(literals)
            .map_err(|e| e.to_string())?;

        // Byte classes: a byte in no literal never advances a match, so all such bytes act
        // alike; the two cases of an ASCII letter act alike.
        let mut classes = [0u8; 256];
        let mut next_class = 1usize;
        for l in literals {
            for b in l.bytes() {
                let (lo, up) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
                if classes[usize::from(lo)] == 0 {
                    let c = u8::try_from(next_class).map_err(|_| "too many byte classes")?;
                    classes[usize::from(lo)] = c;
                    classes[usize::from(up)] = c;
                    next_class += 1;
                }
            }
        }
        let stride = next_class;
        let representative: Vec<u8> = (0..stride)
            .map(|c| {
                (0..=255u8)
                    .find(|&b| usize::from(classes[usize::from(b)]) == c)
                    .unwrap_or(0)
            })
            .collect();

        // Every state reachable from the unanchored start, breadth first.
        let start = dfa.start_state(Anchored::No).map_err(|e| e.to_string())?;
        let mut index = HashMap::from([(start, 0usize)]);
        let mut states = vec![start];
        let mut i = 0;
        while let Some(&sid) = states.get(i) {
            for &b in &representative {
                let next = dfa.next_state(Anchored::No, sid, b);
                if let std::collections::hash_map::Entry::Vacant(v) = index.entry(next) {
                    v.insert(states.len());
                    states.push(next);
                }
            }
            i += 1;
        }
        if states.iter().any(|&s| dfa.is_dead(s)) {
            return Err("literal automaton reaches a dead state".into());
        }
        // Renumber: non-match states first, then match states from `first_match`, a power of
        // two above every non-match state, so that several states can be tested for a match
        // at once by OR-ing them (an OR of numbers below a power of two stays below it).
        let (plain, matching): (Vec<usize>, Vec<usize>) =
            (0..states.len()).partition(|&k| !dfa.is_match(states[k]));
        let first_match = (plain.len() * stride).next_power_of_two();
        let mut renumber = vec![0usize; states.len()];
        for (new, &old) in plain.iter().enumerate() {
            renumber[old] = new * stride;
        }
        for (new, &old) in matching.iter().enumerate() {
            renumber[old] = first_match + new * stride;
        }
        let too_large = |_| "literal automaton too large";
        let id = |k: usize| u32::try_from(renumber[k]).map_err(too_large);
        let mut table = vec![0u32; first_match + matching.len() * stride];
        for (k, &sid) in states.iter().enumerate() {
            for (c, &b) in representative.iter().enumerate() {
                let next = dfa.next_state(Anchored::No, sid, b);
                table[renumber[k] + c] = id(index[&next])?;
            }
        }
        let mut output_at = vec![0u32];
        let mut outputs = Vec::new();
        for &k in &matching {
            let sid = states[k];
            for m in 0..dfa.match_len(sid) {
                let pid = dfa.match_pattern(sid, m);
                let len = u32::try_from(dfa.pattern_len(pid)).map_err(|_| "literal too long")?;
                outputs.push((pid.as_u32(), len));
            }
            output_at.push(u32::try_from(outputs.len()).map_err(|_| "too many outputs")?);
        }
        Ok(Dfa {
            classes,
            stride,
            table,
            start: id(0)?,
            first_match: u32::try_from(first_match).map_err(too_large)?,
            output_at,
            outputs,
            max_len: literals.iter().map(String::len).max().unwrap_or(0),
        })
    }

    /// Records in `found` every literal occurring in `hay`, at its first offset.
    fn scan(&self, hay: &[u8], found: &mut Found) {
        let n = hay.len();
        let seg = n / STREAMS;
        if n < SPLIT_MIN_BYTES || seg <= self.max_len {
            self.run(hay, 0, n, self.start as usize, found);
            return;
        }
        // Segment j covers [lo[j], hi[j]); after the first, each starts max_len - 1 early.
        let back = self.max_len.saturating_sub(1);
        let lo: [usize; STREAMS] = std::array::from_fn(|j| (j * seg).saturating_sub(back));
        let hi: [usize; STREAMS] = std::array::from_fn(|j| if j + 1 == STREAMS { n } else { (j + 1) * seg });
        let common = (0..STREAMS).map(|j| hi[j] - lo[j]).min().unwrap_or(0);
        let (table, classes) = (&self.table[..], &self.classes);
        let first_match = self.first_match as usize;
        // Occurrences reach `found` segment by segment, so the first one recorded for a literal
        // is its first in the text (one seen in an overlap is seen by the earlier segment
        // too). Later segments' hits wait in `later`: usually none.
        let mut later: [Vec<(usize, usize)>; STREAMS] = Default::default();
        let seg_at = |j: usize| hay.get(lo[j]..lo[j] + common).unwrap_or_default();
        let (s0, s1, s2, s3) = (seg_at(0), seg_at(1), seg_at(2), seg_at(3));
        let step = |st: usize, b: u8| self.step(table, classes, st, b);
        let start = self.start as usize;
        let (mut t0, mut t1, mut t2, mut t3) = (start, start, start, start);
        for (i, (((&b0, &b1), &b2), &b3)) in s0.iter().zip(s1).zip(s2).zip(s3).enumerate() {
            (t0, t1, t2, t3) = (step(t0, b0), step(t1, b1), step(t2, b2), step(t3, b3));
            if (t0 | t1 | t2 | t3) >= first_match {
                self.record_streams([t0, t1, t2, t3], &lo, i, found, &mut later);
            }
        }
        let st = [t0, t1, t2, t3];
        for j in 0..STREAMS {
            for &(lit, at) in &later[j] {
                found.insert(lit, at);
            }
            self.run(hay, lo[j] + common, hi[j], st[j], found);
        }
    }

    /// Records the matches of the lockstep streams at step `i` (rare: kept out of the loop).
    #[cold]
    #[inline(never)]
    fn record_streams(
        &self,
        st: [usize; STREAMS],
        lo: &[usize; STREAMS],
        i: usize,
        found: &mut Found,
        later: &mut [Vec<(usize, usize)>; STREAMS],
    ) {
        self.record(st[0], lo[0] + i, found);
        for j in 1..STREAMS {
            self.record(st[j], lo[j] + i, &mut later[j]);
        }
    }

    /// The state after `st` on byte `b`. (Every entry of the table is a valid state; the
    /// fallback to the start state only spares the bounds check a panic path.)
    #[inline(always)]
    fn step(&self, table: &[u32], classes: &[u8; 256], st: usize, b: u8) -> usize {
        table
            .get(st + usize::from(classes[usize::from(b)]))
            .map_or(self.start as usize, |&t| t as usize)
    }

    /// One pass over `hay[from..to]` from state `st`.
    fn run(&self, hay: &[u8], from: usize, to: usize, mut st: usize, found: &mut Found) {
        let first_match = self.first_match as usize;
        let (table, classes) = (&self.table[..], &self.classes);
        for (i, &b) in hay.get(from..to).unwrap_or_default().iter().enumerate() {
            st = self.step(table, classes, st, b);
            if st >= first_match {
                self.record(st, from + i, found);
            }
        }
    }

    /// Records the literals of state `st`, reached on the byte at offset `at`.
    fn record(&self, st: usize, at: usize, sink: &mut impl Sink) {
        let Some(k) = st.checked_sub(self.first_match as usize).map(|d| d / self.stride) else {
            return;
        };
        let (Some(&a), Some(&b)) = (self.output_at.get(k), self.output_at.get(k + 1)) else {
            return;
        };
        for &(lit, len) in self.outputs.get(a as usize..b as usize).unwrap_or_default() {
            sink.add(lit as usize, (at + 1).saturating_sub(len as usize));
        }
    }
}

/// Where found literals go: straight into [`Found`], or held back for a later segment.
trait Sink {
    fn add(&mut self, literal: usize, at: usize);
}

impl Sink for Found {
    fn add(&mut self, literal: usize, at: usize) {
        self.insert(literal, at);
    }
}

impl Sink for Vec<(usize, usize)> {
    fn add(&mut self, literal: usize, at: usize) {
        self.push((literal, at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::{AhoCorasickBuilder, AhoCorasickKind};

    /// The first offset of each literal, the plain way: the crate's own overlapping search.
    fn reference(literals: &[String], hay: &[u8]) -> Vec<(usize, usize)> {
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(literals)
            .expect("automaton");
        let mut first: Vec<Option<usize>> = vec![None; literals.len()];
        for m in ac.find_overlapping_iter(hay) {
            let f = &mut first[m.pattern().as_usize()];
            *f = Some(f.map_or(m.start(), |x: usize| x.min(m.start())));
        }
        first
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|p| (i, p)))
            .collect()
    }

    fn scanned(scanner: &LiteralScanner, literals: &[String], hay: &[u8]) -> Vec<(usize, usize)> {
        let mut found = Found::new(literals.len());
        scanner.scan(hay, &mut found);
        (0..literals.len())
            .filter_map(|i| found.pos(i).map(|p| (i, p)))
            .collect()
    }

    fn catalogue_literals() -> Vec<String> {
        crate::Catalogue::builtin().literals.clone()
    }

    #[test]
    fn finds_the_same_first_offsets_as_aho_corasick_on_the_catalogue() {
        let lits = catalogue_literals();
        let mut texts: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}".to_vec(),
            b"RATE LIMIT exceeded; Rate_Limit_Exceeded; insufficient_quota\n".repeat(3),
        ];
        // Long texts, split into segments: literals placed across every cut and at both ends.
        for len in [4096usize, 5000, 20_000, 65_537] {
            let mut t = vec![b'x'; len];
            for (k, lit) in lits.iter().enumerate() {
                let at = (k * 7919) % len.saturating_sub(lit.len()).max(1);
                t[at..at + lit.len()].copy_from_slice(lit.to_ascii_uppercase().as_bytes());
            }
            for cut in 1..STREAMS {
                let lit = lits[cut % lits.len()].as_bytes();
                let at = (len / STREAMS) * cut - lit.len() / 2;
                t[at..at + lit.len()].copy_from_slice(lit);
            }
            let last = lits[0].as_bytes();
            t[len - last.len()..].copy_from_slice(last);
            texts.push(t);
        }
        let grams = &crate::Catalogue::builtin().scanner;
        assert!(
            matches!(grams.0, Scan::Grams(_)),
            "the catalogue's literals are long enough"
        );
        let dfa = LiteralScanner::dfa(&lits).expect("dfa");
        for t in &texts {
            let want = reference(&lits, t);
            assert_eq!(scanned(grams, &lits, t), want, "grams, text of {} bytes", t.len());
            assert_eq!(scanned(&dfa, &lits, t), want, "dfa, text of {} bytes", t.len());
        }
    }

    #[test]
    fn gram_filter_finds_overlapping_literals_at_odd_and_even_starts_and_in_every_tail() {
        let lits: Vec<String> = ["aaaaa", "aaaab", "abcde", "bcdef", "cdefgh", "xyz12345", "e:{\"t"]
            .map(String::from)
            .to_vec();
        let scanner = LiteralScanner::new(&lits).expect("scanner");
        assert!(matches!(scanner.0, Scan::Grams(_)));
        // Small alphabet, so literals overlap and recur; every length 0..=40 covers each tail.
        let alphabet = b"aAbBcdeEfgh:{\"t xyz12345";
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..=40usize {
            for _ in 0..200 {
                let t: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        alphabet[(x % alphabet.len() as u64) as usize]
                    })
                    .collect();
                assert_eq!(
                    scanned(&scanner, &lits, &t),
                    reference(&lits, &t),
                    "{:?}",
                    String::from_utf8_lossy(&t)
                );
            }
        }
        for t in [
            "aaaaaaaaab",
            "xaaaaab",
            "ABCDEFGH",
            "xAbCdEfGh",
            "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzaaaab",
        ] {
            assert_eq!(
                scanned(&scanner, &lits, t.as_bytes()),
                reference(&lits, t.as_bytes()),
                "{t}"
            );
        }
    }

    #[test]
    fn overlapping_and_nested_literals_are_all_found_at_their_first_offset() {
        let lits: Vec<String> = ["abc", "bc", "c", "abcd", "xyz"].map(String::from).to_vec();
        let scanner = LiteralScanner::new(&lits).expect("scanner");
        for t in [
            "zzabcdzzABC".to_owned(),
            format!("{}abcd{}bc", "q".repeat(3000), "w".repeat(9000)),
            format!("{}xy|z{}XYZ", "abc".repeat(2000), "c".repeat(5000)),
        ] {
            assert!(matches!(scanner.0, Scan::Dfa(_)), "short literals use the DFA");
            assert_eq!(
                scanned(&scanner, &lits, t.as_bytes()),
                reference(&lits, t.as_bytes()),
                "{}",
                t.len()
            );
        }
    }
}
