-- The one candidate a route is pinned to (an editor session's mode, `recourse acp`): every
-- other candidate of the profile is never eligible for the route, so it never switches away.
-- Written with the route, removed with it.
CREATE TABLE route_pins (
    route_id     TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    candidate_id TEXT NOT NULL
);
