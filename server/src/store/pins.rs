//! Route pins: the one candidate a route may run on (an editor session's mode), written with the
//! route in the writer's transaction and read where candidates' eligibility is decided.

use super::{sql, StoreError, Tx, Writes};

impl Writes {
    /// Pins the route to `candidate_id` (after the route's insert in the same flush).
    pub(crate) fn put_pin(&mut self, route_id: &str, candidate_id: &str) {
        self.push_text(
            "INSERT INTO route_pins (route_id, candidate_id) VALUES (?, ?)",
            &[route_id, candidate_id],
        );
    }
}

impl Tx<'_> {
    /// The candidate the route is pinned to, if any.
    pub(crate) async fn pin(&mut self, route_id: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sql::query("SELECT candidate_id FROM route_pins WHERE route_id = ?")
                .bind(route_id)
                .scalar_optional(&mut *self.conn)
                .await?,
        )
    }
}
