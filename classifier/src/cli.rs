//! `recourse classify`: envelopes in, one verdict line out per envelope (contract 3).
//!
//! Input is either one JSON document (possibly pretty-printed over many lines) or JSON Lines.
//! The first non-blank line decides: if it is a complete JSON value, the input is JSON Lines;
//! otherwise the whole input is read as one document, and if that fails too, it is read as
//! JSON Lines after all (so a malformed first line gets its own error and the rest still run).
//! A line that cannot be used prints `{"error":{"kind":...,"message":...,"line":N}}` (N is
//! the 1-based line number where that envelope starts); error messages never echo the input.

use crate::{
    envelope::{Envelope, EnvelopeError, MAX_ENVELOPE_BYTES},
    Catalogue,
};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::io::{self, BufRead, Read as _, Write};

#[derive(Serialize)]
struct ErrorLine<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    kind: &'a str,
    message: String,
    line: usize,
}

/// Classifies every envelope read from `input` with the built-in catalogue and writes one
/// JSON line per envelope to `output`. Errors are per line; only IO errors abort.
pub fn classify_stream(input: impl BufRead, output: impl Write, now: DateTime<Utc>) -> io::Result<()> {
    classify_stream_with(Catalogue::builtin(), input, output, now)
}

/// [`classify_stream`] with a given catalogue.
pub fn classify_stream_with(
    cat: &Catalogue,
    mut input: impl BufRead,
    mut output: impl Write,
    now: DateTime<Utc>,
) -> io::Result<()> {
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    // Find the first non-blank line.
    let first = loop {
        buf.clear();
        let Some(over) = read_bounded_line(&mut input, &mut buf)? else {
            return output.flush();
        };
        line_no += 1;
        if over || !buf.trim_ascii().is_empty() {
            break (line_no, over);
        }
    };
    let (first_line, first_over) = first;
    if first_over {
        write_error(
            &mut output,
            "too_large",
            format!("line exceeds {MAX_ENVELOPE_BYTES} bytes"),
            first_line,
        )?;
        return json_lines(cat, &mut input, &mut output, now, line_no);
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(buf.trim_ascii()).is_ok() {
        emit(cat, &buf, &mut output, now, first_line)?;
        return json_lines(cat, &mut input, &mut output, now, line_no);
    }
    // Not a complete value: one multi-line document, most likely.
    let mut doc = buf.clone();
    doc.push(b'\n');
    let mut rest = Vec::new();
    input.take(MAX_ENVELOPE_BYTES as u64 + 1).read_to_end(&mut rest)?;
    doc.extend_from_slice(&rest);
    if doc.len() > MAX_ENVELOPE_BYTES {
        return write_error(
            &mut output,
            "too_large",
            format!("document exceeds {MAX_ENVELOPE_BYTES} bytes"),
            first_line,
        );
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(&doc).is_ok() {
        return emit(cat, &doc, &mut output, now, first_line);
    }
    // Neither: treat it as JSON Lines whose first line is broken.
    json_lines(cat, &mut io::Cursor::new(doc), &mut output, now, first_line - 1)
}

fn json_lines(
    cat: &Catalogue,
    input: &mut impl BufRead,
    output: &mut impl Write,
    now: DateTime<Utc>,
    mut line_no: usize,
) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let Some(over) = read_bounded_line(input, &mut buf)? else {
            return output.flush();
        };
        line_no += 1;
        if over {
            write_error(
                output,
                "too_large",
                format!("line exceeds {MAX_ENVELOPE_BYTES} bytes"),
                line_no,
            )?;
        } else if !buf.trim_ascii().is_empty() {
            emit(cat, &buf, output, now, line_no)?;
        }
    }
}

/// Reads one line (without its newline) into `buf`, keeping at most `MAX_ENVELOPE_BYTES`;
/// returns `Some(true)` when the line was longer (the excess is consumed and dropped), and
/// `None` at the end of the input.
fn read_bounded_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<bool>> {
    let mut over = false;
    let mut any = false;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok(any.then_some(over));
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !over {
            let room = MAX_ENVELOPE_BYTES - buf.len();
            if take > room {
                over = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        input.consume(if done { take + 1 } else { take });
        if done {
            return Ok(Some(over));
        }
    }
}

fn emit(
    cat: &Catalogue,
    bytes: &[u8],
    output: &mut impl Write,
    now: DateTime<Utc>,
    line: usize,
) -> io::Result<()> {
    match Envelope::parse(bytes) {
        Ok(env) => {
            let verdict = cat.classify(&env, now);
            serde_json::to_writer(&mut *output, &verdict)?;
            output.write_all(b"\n")
        }
        Err(e) => write_error(output, e.kind(), message(&e), line),
    }
}

/// serde_json's messages name positions and expected tokens, never input content.
fn message(e: &EnvelopeError) -> String {
    e.to_string()
}

fn write_error(output: &mut impl Write, kind: &str, message: String, line: usize) -> io::Result<()> {
    serde_json::to_writer(
        &mut *output,
        &ErrorLine {
            error: ErrorBody { kind, message, line },
        },
    )?;
    output.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn run(input: &str) -> Vec<Value> {
        let now = DateTime::parse_from_rfc3339("2026-11-30T08:00:00Z")
            .expect("now")
            .with_timezone(&Utc);
        let mut out = Vec::new();
        classify_stream(io::Cursor::new(input.as_bytes()), &mut out, now).expect("io");
        String::from_utf8(out)
            .expect("utf8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("each output line is JSON"))
            .collect()
    }

    const ENV: &str = r#"{"items":[{"kind":"process_exit","code":127}]}"#;

    #[test]
    fn json_lines_give_one_line_each_and_a_bad_line_does_not_stop_the_rest() {
        let out = run(&format!("{ENV}\n\n{{not json\n{ENV}\n{{\"items\":5}}\n"));
        assert_eq!(out.len(), 4);
        assert!(out[0].get("code").is_some());
        assert_eq!(out[1]["error"]["line"], 3);
        assert_eq!(out[1]["error"]["kind"], "malformed_json");
        assert!(out[2].get("gate").is_some());
        assert_eq!(out[3]["error"]["kind"], "missing_items");
        assert_eq!(out[3]["error"]["line"], 5);
    }

    #[test]
    fn a_pretty_printed_document_is_one_envelope() {
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(ENV).expect("env")).expect("pretty");
        let out = run(&pretty);
        assert_eq!(out.len(), 1);
        assert!(out[0].get("classifier_rule").is_some());
    }

    #[test]
    fn a_broken_first_line_in_json_lines_still_lets_the_rest_run() {
        let out = run(&format!("{{\"items\":[\n{ENV}\n"));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["error"]["line"], 1);
        assert!(out[1].get("gate").is_some());
    }

    #[test]
    fn empty_input_prints_nothing() {
        assert!(run("").is_empty());
        assert!(run("\n  \n").is_empty());
    }
}
