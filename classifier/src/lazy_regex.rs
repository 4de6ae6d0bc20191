//! A rule's regex, compiled the first time a signal reaches it.
//!
//! Most signals never get as far as a rule's regex: the cheap conditions and the literal
//! triggers turn them away first. Compiled eagerly, the catalogue's regexes (several with
//! Unicode classes under `(?i)`) held about 1.2 MiB of NFA states in every process that
//! classifies, `recourse acp` included, whose successful turns reach almost none of them.
//! So a rule keeps its pattern, and the regex is built on first use and kept.
//!
//! [`crate::Catalogue::from_sources`] still compiles every pattern once to report a bad one
//! with the other problems (a catalogue that does not compile is refused); the builtin
//! catalogue, whose patterns this crate's tests compile that way, skips that first build.

use regex::{Regex, RegexBuilder};
use std::sync::OnceLock;

/// A regex's compiled size limit; keeps a hostile or careless pattern from blowing up memory.
const SIZE_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone)]
pub(crate) struct LazyRegex {
    pattern: Box<str>,
    compiled: OnceLock<Regex>,
}

impl LazyRegex {
    /// `pattern`, compiled once now to check it, then dropped until first use.
    pub(crate) fn checked(pattern: &str) -> Result<LazyRegex, regex::Error> {
        build(pattern)?;
        Ok(LazyRegex::unchecked(pattern))
    }

    /// `pattern`, not compiled until first use: for patterns already checked (the builtin
    /// catalogue's, by this crate's tests).
    pub(crate) fn unchecked(pattern: &str) -> LazyRegex {
        LazyRegex {
            pattern: pattern.into(),
            compiled: OnceLock::new(),
        }
    }

    /// The compiled regex.
    pub(crate) fn get(&self) -> &Regex {
        self.compiled.get_or_init(|| {
            // Checked when the catalogue was built (`checked`), or one of the builtin
            // catalogue's patterns, which the tests check: a failure is a build defect.
            #[allow(clippy::expect_used)]
            build(&self.pattern).expect("a catalogue regex compiles, as checked")
        })
    }
}

fn build(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern).size_limit(SIZE_LIMIT).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_pattern_is_refused_when_checked_and_a_good_one_matches_on_first_use() {
        assert!(LazyRegex::checked("(unclosed").is_err());
        assert!(
            LazyRegex::checked(&format!("a{{{}}}", 1 << 20)).is_err(),
            "over the size limit"
        );
        let re = LazyRegex::checked("(?i)rate ?limit").unwrap();
        assert!(re.compiled.get().is_none(), "not kept compiled before first use");
        assert!(re.get().is_match("Rate limit exceeded"));
        assert!(re.compiled.get().is_some());
    }
}
