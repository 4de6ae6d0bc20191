//! The work a route carries (design contract 7), one row per route, written in the writer's
//! transaction with the route start or the new prompt generation that brings it.

use super::{sql, Store, StoreError, Tx, Writes};
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
        let json: Option<String> = sql::query("SELECT work_json FROM route_work WHERE route_id = ?")
            .bind(route_id)
            .scalar_optional(&self.pool)
            .await?;
        json.map(|j| super::json("route_work", route_id, "work", &j))
            .transpose()
    }
}

impl Tx<'_> {
    /// The route's current work, as this transaction sees it.
    pub(crate) async fn route_work(&mut self, route_id: &str) -> Result<Option<Work>, StoreError> {
        let json: Option<String> = sql::query("SELECT work_json FROM route_work WHERE route_id = ?")
            .bind(route_id)
            .scalar_optional(&mut *self.conn)
            .await?;
        json.map(|j| super::json("route_work", route_id, "work", &j))
            .transpose()
    }
}

/// A route's stored result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct RouteResult {
    /// The invocation generation of the attempt that produced it.
    pub generation: u64,
    /// The response body as the provider sent it (bounded).
    pub body: String,
    pub stored_at: DateTime<Utc>,
}

impl Writes {
    /// Stores (or replaces) the route's result.
    pub(crate) fn put_result(&mut self, route_id: &str, generation: u64, body: &str, at: DateTime<Utc>) {
        self.push_text(
            "INSERT INTO route_results (route_id, generation, body, stored_at) VALUES (?, CAST(? AS INTEGER), ?, ?) \
             ON CONFLICT(route_id) DO UPDATE SET generation = excluded.generation, body = excluded.body, \
             stored_at = excluded.stored_at",
            &[route_id, &generation.to_string(), body, &super::ts(at)],
        );
    }
}

impl Store {
    /// The route's stored result, if any.
    pub(crate) async fn route_result(&self, route_id: &str) -> Result<Option<RouteResult>, StoreError> {
        let row = sql::query("SELECT generation, body, stored_at FROM route_results WHERE route_id = ?")
            .bind(route_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(RouteResult {
                generation: super::non_negative(
                    "route_results",
                    route_id,
                    "generation",
                    r.try_get("generation")?,
                )?,
                body: r.try_get("body")?,
                stored_at: super::parse_ts("route_results", route_id, &r.try_get::<String, _>("stored_at")?)?,
            })
        })
        .transpose()
    }

    /// Clears the route's stored result (the caller has it); whether there was one.
    pub(crate) async fn clear_route_result(&self, route_id: &str) -> Result<bool, StoreError> {
        let done = sql::query("DELETE FROM route_results WHERE route_id = ?")
            .bind(route_id)
            .execute(&self.pool)
            .await?;
        Ok(done > 0)
    }
}
