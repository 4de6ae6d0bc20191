//! What an agent did during one attempt, as a person reads it: its messages as text, its
//! thoughts, and its tool calls as rows (kind, title, status). Folded from the ACP
//! `session/update`s the `acp` dispatcher forwards (already redacted, token-like ids already
//! pseudonyms), one update at a time, within bounds.
//!
//! Bounds, per attempt: [`MAX_TRANSCRIPT_ITEMS`] entries and [`MAX_TRANSCRIPT_TEXT_BYTES`] of
//! text. Past either, later text and new entries are dropped and the transcript says it was
//! cut; a tool call already listed still has its status updated (a bounded change in place).
//! The first output is what decides the safety gate, so the beginning is what is kept.

use crate::limits::{MAX_TOOL_FIELD_BYTES, MAX_TRANSCRIPT_ITEMS, MAX_TRANSCRIPT_TEXT_BYTES};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One entry of a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TranscriptItem {
    /// The agent's answer text (consecutive chunks joined).
    Message { text: String },
    /// The agent's reasoning, shown folded.
    Thought { text: String },
    /// A tool call, updated in place as its status changes.
    ToolCall {
        id: String,
        kind: Option<String>,
        title: Option<String>,
        status: Option<String>,
    },
}

/// One attempt's transcript.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Transcript {
    pub items: Vec<TranscriptItem>,
    /// Bytes of text kept so far.
    pub text_bytes: usize,
    /// Something was dropped at the bounds.
    pub truncated: bool,
}

/// One attempt of a route and what its agent did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptTranscript {
    /// The attempt number (the route's dispatch records say which candidate ran it).
    pub attempt: u32,
    /// The prompt generation it ran for.
    pub generation: u64,
    pub transcript: Transcript,
}

impl Transcript {
    /// Whether the agent showed anything a retry could repeat: a message or a tool call.
    /// (Thoughts are not output.)
    pub fn has_output(&self) -> bool {
        self.items
            .iter()
            .any(|i| !matches!(i, TranscriptItem::Thought { .. }))
    }

    /// Folds one `session/update` payload in. Unknown and uninteresting kinds (the prompt
    /// echoed back, plans, commands, modes) change nothing.
    pub fn apply(&mut self, update: &Value) {
        let text = || update.pointer("/content/text").and_then(Value::as_str);
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("agent_message_chunk") => {
                if let Some(t) = text() {
                    self.append(t, false);
                }
            }
            Some("agent_thought_chunk") => {
                if let Some(t) = text() {
                    self.append(t, true);
                }
            }
            Some(kind @ ("tool_call" | "tool_call_update")) => {
                let Some(id) = update.get("toolCallId").and_then(Value::as_str) else {
                    return;
                };
                let field = |name: &str| {
                    update
                        .get(name)
                        .and_then(Value::as_str)
                        .map(|s| cut(s, MAX_TOOL_FIELD_BYTES).to_owned())
                };
                let (kind_field, title, status) = (field("kind"), field("title"), field("status"));
                let room = self.room();
                let known = self.items.iter_mut().find_map(|i| match i {
                    TranscriptItem::ToolCall {
                        id: have,
                        kind,
                        title,
                        status,
                    } if have == id => Some((kind, title, status)),
                    _ => None,
                });
                match known {
                    Some((k, t, s)) => {
                        for (slot, new) in [(k, kind_field), (t, title), (s, status)] {
                            if new.is_some() {
                                *slot = new;
                            }
                        }
                    }
                    None if room => self.items.push(TranscriptItem::ToolCall {
                        id: cut(id, MAX_TOOL_FIELD_BYTES).to_owned(),
                        kind: kind_field,
                        title,
                        // A first sight through an update has no `pending` of its own.
                        status: status.or_else(|| (kind == "tool_call").then(|| "pending".to_owned())),
                    }),
                    None => self.truncated = true,
                }
            }
            _ => {}
        }
    }

    fn room(&self) -> bool {
        self.items.len() < MAX_TRANSCRIPT_ITEMS
    }

    fn append(&mut self, text: &str, thought: bool) {
        let left = MAX_TRANSCRIPT_TEXT_BYTES.saturating_sub(self.text_bytes);
        let kept = cut(text, left);
        if kept.len() < text.len() {
            self.truncated = true;
        }
        if kept.is_empty() {
            return;
        }
        let room = self.room();
        match self.items.last_mut() {
            Some(TranscriptItem::Message { text }) if !thought => text.push_str(kept),
            Some(TranscriptItem::Thought { text }) if thought => text.push_str(kept),
            _ if room => self.items.push(if thought {
                TranscriptItem::Thought {
                    text: kept.to_owned(),
                }
            } else {
                TranscriptItem::Message {
                    text: kept.to_owned(),
                }
            }),
            _ => {
                self.truncated = true;
                return;
            }
        }
        self.text_bytes += kept.len();
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(kind: &str, text: &str) -> Value {
        json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
    }

    #[test]
    fn chunks_join_into_messages_and_tool_calls_update_in_place() {
        let mut t = Transcript::default();
        t.apply(&chunk("agent_thought_chunk", "Let me "));
        t.apply(&chunk("agent_thought_chunk", "look."));
        t.apply(&chunk("agent_message_chunk", "Reading "));
        t.apply(&chunk("agent_message_chunk", "the file."));
        t.apply(&json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "kind": "read", "title": "Read main.rs"}));
        t.apply(&json!({"sessionUpdate": "plan", "entries": []}));
        t.apply(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}));
        t.apply(&chunk("user_message_chunk", "the prompt"));
        assert_eq!(
            t.items,
            vec![
                TranscriptItem::Thought {
                    text: "Let me look.".into()
                },
                TranscriptItem::Message {
                    text: "Reading the file.".into()
                },
                TranscriptItem::ToolCall {
                    id: "t1".into(),
                    kind: Some("read".into()),
                    title: Some("Read main.rs".into()),
                    status: Some("completed".into()),
                },
            ]
        );
        assert!(t.has_output());
        assert!(!t.truncated);
    }

    #[test]
    fn thoughts_alone_are_not_output() {
        let mut t = Transcript::default();
        t.apply(&chunk("agent_thought_chunk", "hmm"));
        assert!(!t.has_output());
        t.apply(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "t9", "status": "failed"}));
        assert!(t.has_output());
    }

    #[test]
    fn text_and_entries_stop_at_their_bounds_and_say_so() {
        let mut t = Transcript::default();
        let big = "é".repeat(MAX_TRANSCRIPT_TEXT_BYTES);
        t.apply(&chunk("agent_message_chunk", &big));
        assert_eq!(t.text_bytes, MAX_TRANSCRIPT_TEXT_BYTES);
        assert!(t.truncated);
        t.apply(&chunk("agent_message_chunk", "more"));
        assert_eq!(t.text_bytes, MAX_TRANSCRIPT_TEXT_BYTES);

        let mut t = Transcript::default();
        for i in 0..MAX_TRANSCRIPT_ITEMS + 5 {
            t.apply(&json!({"sessionUpdate": "tool_call", "toolCallId": format!("t{i}")}));
        }
        assert_eq!(t.items.len(), MAX_TRANSCRIPT_ITEMS);
        assert!(t.truncated);
        // A call already listed is still brought up to date.
        t.apply(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "t0", "status": "completed"}));
        assert!(matches!(&t.items[0], TranscriptItem::ToolCall { status: Some(s), .. } if s == "completed"));
    }
}
