//! What agents did in recent attempts, kept for the route page: each running attempt's live
//! updates (already redacted, as the event stream sends them) folded into a
//! [`policy::transcript::Transcript`] as they arrive.
//!
//! What is kept, and why only this: it is display, never a fact a decision reads (the
//! classifier reads the attempt's own evidence), so it lives in this process's memory, bounded:
//! per attempt by `policy::transcript`'s bounds, per route the latest
//! [`MAX_TRANSCRIPT_ATTEMPTS`] attempts, and at most [`MAX_TRANSCRIPT_ROUTES`] routes (the one
//! updated longest ago goes first). It is gone after a restart, and with several replicas each
//! keeps what its own agents said (the replica that ran the attempt). README says so.

use policy::{
    limits::{MAX_TRANSCRIPT_ATTEMPTS, MAX_TRANSCRIPT_ROUTES},
    transcript::AttemptTranscript,
};
use serde_json::Value;
use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
};

#[derive(Default)]
struct Kept {
    /// Routes by id, each with its latest attempts, oldest first.
    routes: HashMap<String, VecDeque<AttemptTranscript>>,
    /// Route ids, least recently updated first.
    order: VecDeque<String>,
}

/// The transcripts of recent attempts.
#[derive(Default)]
pub struct Transcripts {
    kept: Mutex<Kept>,
}

impl Transcripts {
    /// Folds one live update of `attempt` (at prompt `generation`) of `route_id` in.
    pub fn record(&self, route_id: &str, attempt: u32, generation: u64, update: &Value) {
        let Ok(mut kept) = self.kept.lock() else { return };
        let kept = &mut *kept;
        if let Some(at) = kept.order.iter().position(|r| r == route_id) {
            kept.order.remove(at);
        }
        kept.order.push_back(route_id.to_owned());
        while kept.order.len() > MAX_TRANSCRIPT_ROUTES {
            if let Some(gone) = kept.order.pop_front() {
                kept.routes.remove(&gone);
            }
        }
        let attempts = kept.routes.entry(route_id.to_owned()).or_default();
        let current = match attempts.iter().position(|a| a.attempt == attempt) {
            Some(i) => i,
            None => {
                attempts.push_back(AttemptTranscript {
                    attempt,
                    generation,
                    transcript: Default::default(),
                });
                while attempts.len() > MAX_TRANSCRIPT_ATTEMPTS {
                    attempts.pop_front();
                }
                attempts.len() - 1
            }
        };
        attempts[current].transcript.apply(update);
    }

    /// The kept attempts of `route_id`, oldest first.
    pub fn of(&self, route_id: &str) -> Vec<AttemptTranscript> {
        self.kept
            .lock()
            .ok()
            .and_then(|k| k.routes.get(route_id).map(|a| a.iter().cloned().collect()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(text: &str) -> Value {
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    }

    #[test]
    fn each_attempt_keeps_its_own_transcript_and_only_the_latest_attempts_stay() {
        let t = Transcripts::default();
        t.record("r1", 1, 1, &message("first"));
        t.record("r1", 2, 1, &message("second"));
        t.record("r1", 1, 1, &message(" again"));
        let kept = t.of("r1");
        assert_eq!(kept.iter().map(|a| a.attempt).collect::<Vec<_>>(), vec![1, 2]);
        assert!(kept[0].transcript.has_output());
        for attempt in 3..=(MAX_TRANSCRIPT_ATTEMPTS as u32 + 4) {
            t.record("r1", attempt, 2, &message("x"));
        }
        let kept = t.of("r1");
        assert_eq!(kept.len(), MAX_TRANSCRIPT_ATTEMPTS);
        assert_eq!(
            kept.last().map(|a| a.attempt),
            Some(MAX_TRANSCRIPT_ATTEMPTS as u32 + 4)
        );
        assert!(t.of("r2").is_empty());
    }

    #[test]
    fn the_route_updated_longest_ago_goes_first() {
        let t = Transcripts::default();
        for i in 0..MAX_TRANSCRIPT_ROUTES {
            t.record(&format!("r{i}"), 1, 1, &message("x"));
        }
        t.record("r0", 1, 1, &message("y"));
        t.record("new", 1, 1, &message("z"));
        assert!(!t.of("r0").is_empty(), "updated again, so kept");
        assert!(t.of("r1").is_empty(), "the oldest went");
        assert!(!t.of("new").is_empty());
    }
}
