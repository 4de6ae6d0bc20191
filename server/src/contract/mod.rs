//! The parts of the OpenAPI document that the code's annotations do not say by themselves, put
//! onto the generated document ([`crate::openapi`]) in one place, from the same constants the
//! server enforces:
//!
//! - [`bound`](bounds::bound): the limits and patterns of `policy::limits` on every request property the
//!   server bounds, the request integers' ranges (a whole number out of its type's range is
//!   refused, so the schema says the range), and the shape checks of `policy::input`
//!   (`check_work`) that JSON Schema can state.
//! - [`statuses`](statuses::statuses): every status an operation can answer, each with its body's schema (the
//!   shared `ApiError`, or `ValidationErrors` for 422), by the rules the extractors
//!   ([`crate::api`]), the request guard ([`crate::guard`]) and [`crate::failure`] follow.
//! - [`links`](links::links): which operation's response gives the id another operation takes.
//! - [`named_variants`](shapes::named_variants) and `tags`: shapes client generators can name.
//!
//! A request the published schema allows is one the server accepts (or answers 404/409 for,
//! when the thing named is absent or has moved on), and one it refuses the schema excludes. The
//! exceptions are a profile write, 422 for rules JSON Schema cannot state (targets repeat the
//! policy's candidate ids in order, ids are unique, a `concrete` profile has one candidate, and
//! the policy may be a legacy shape, so it is an open object there), and a token request naming
//! a profile that does not exist (422 at `profile_ids[i]`); `schemathesis.toml` says so.
//! Schemathesis checks all this against a running server in `./dev test`;
//! `server/tests/it/contract.rs` checks the document's shape in `cargo test`.

mod bounds;
mod links;
mod shapes;
mod statuses;

pub use bounds::bound;
pub use links::{links, PROFILE_LINKS, ROUTE_LINKS};
pub use shapes::named_variants;
pub use statuses::statuses;

use serde_json::Value;

/// The whole post-processing, in order.
pub fn apply(doc: &mut Value) {
    bound(doc);
    statuses(doc);
    links(doc);
    named_variants(doc);
    shapes::tags(doc);
}

fn schema<'a>(doc: &'a mut Value, name: &str) -> &'a mut Value {
    &mut doc["components"]["schemas"][name]
}
