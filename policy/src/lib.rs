//! `policy`: the pure core of Recourse, compiled into both the server and the WASM UI.
//!
//! Everything here is deterministic: no IO, no clock, no randomness. Time is always passed in
//! as an argument, so the server, the browser and the tests compute the same answers.
//!
//! Crate map:
//! - [`class`]: the two configurable error classes and the registry of semantic codes.
//! - [`classification`]: the classifier's output (contract 2) and the effect-safety gate.

pub mod class;
pub mod classification;
