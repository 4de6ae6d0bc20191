-- PostgreSQL mirror of migrations/sqlite/20261201110000_create_route_results.sql (same version;
-- INTEGER -> BIGINT).
--
-- The result of a route's latest successful attempt that produced one (an HTTP call's response
-- body, bounded by its endpoint's configuration), kept until the caller fetches and clears it,
-- the next result replaces it, or the route is deleted.
CREATE TABLE route_results (
    route_id   TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    generation BIGINT NOT NULL,
    body       TEXT NOT NULL,
    stored_at  TEXT NOT NULL
);
