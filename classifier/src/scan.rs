//! The literal scan: where each catalogue literal first occurs in a signal's text.
//!
//! This is the classifier's only per-byte work on large evidence (bodies, long message runs),
//! so it is built for that. The literals are compiled into an Aho-Corasick DFA (the
//! `aho-corasick` crate's, ASCII case-insensitive, standard overlapping semantics), which is
//! then copied into a compact table: bytes mapped to classes, next states premultiplied by the
//! row width, and match states numbered last, so one step is a class lookup, a table lookup
//! and one comparison.
//!
//! A DFA step depends on the previous one, so a single pass is bound by memory latency, not by
//! instructions. Long texts are therefore cut into [`STREAMS`] segments scanned in lockstep:
//! the lookups of different segments overlap in the CPU. Each segment after the first starts
//! `max_len - 1` bytes early, so a literal crossing a cut is still seen whole; a literal seen
//! twice keeps its smallest offset. Time stays linear in the text, whatever it contains.

use crate::engine::Found;
use aho_corasick::{automaton::Automaton, dfa, Anchored, MatchKind};
use std::collections::HashMap;

/// Segments scanned in lockstep for long texts (the loop below is written out for four).
const STREAMS: usize = 4;
/// Texts shorter than this are scanned in one pass (splitting would not pay).
const SPLIT_MIN_BYTES: usize = 4096;

/// The compiled literal table. Immutable; shared by reference through the catalogue.
#[derive(Clone)]
pub(crate) struct LiteralScanner {
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

impl std::fmt::Debug for LiteralScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteralScanner")
            .field("table_entries", &self.table.len())
            .field("classes", &self.stride)
            .field("max_len", &self.max_len)
            .finish_non_exhaustive()
    }
}

impl LiteralScanner {
    /// Compiles the (lower-cased) literal table.
    pub(crate) fn new(literals: &[String]) -> Result<LiteralScanner, String> {
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
        Ok(LiteralScanner {
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
    pub(crate) fn scan(&self, hay: &[u8], found: &mut Found) {
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
        let scanner = &crate::Catalogue::builtin().scanner;
        for t in &texts {
            assert_eq!(
                scanned(scanner, &lits, t),
                reference(&lits, t),
                "text of {} bytes",
                t.len()
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
            assert_eq!(
                scanned(&scanner, &lits, t.as_bytes()),
                reference(&lits, t.as_bytes()),
                "{}",
                t.len()
            );
        }
    }
}
