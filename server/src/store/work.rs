//! The work a route carries (design contract 7), one row per route, written in the writer's
//! transaction with the route start or the new prompt generation that brings it.

use super::{Store, StoreError, Writes};
use chrono::{DateTime, Utc};
use policy::api::Work;

impl Writes {
    /// Stores (or replaces) the route's work.
    pub(crate) fn put_work(&mut self, route_id: &str, work: &Work, at: DateTime<Utc>) {
        self.push_text(
            "INSERT INTO route_work (route_id, work_json, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT(route_id) DO UPDATE SET work_json = excluded.work_json, updated_at = excluded.updated_at",
            &[route_id, &super::to_json(work), &super::ts(at)],
        );
    }
}

impl Store {
    /// The route's current work, if it carries any.
    pub(crate) async fn route_work(&self, route_id: &str) -> Result<Option<Work>, StoreError> {
        let json: Option<String> = sqlx::query_scalar("SELECT work_json FROM route_work WHERE route_id = ?")
            .bind(route_id)
            .fetch_optional(&self.pool)
            .await?;
        json.map(|j| super::json("route_work", route_id, "work", &j))
            .transpose()
    }
}
