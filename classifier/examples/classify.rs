//! Classifies envelopes from stdin (one document or JSON Lines) at a fixed or current time:
//! `cargo run -p classifier --example classify < envelope.json`. The `recourse classify`
//! command does the same through the server binary.

use chrono::{DateTime, Utc};
use std::io;

fn main() -> io::Result<()> {
    let now = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| DateTime::<Utc>::from(std::time::SystemTime::now()));
    classifier::cli::classify_stream(io::stdin().lock(), io::stdout().lock(), now)
}
