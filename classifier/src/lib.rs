//! `classifier`: evidence envelopes (design contract 1) in, classifications (contract 2) out.
