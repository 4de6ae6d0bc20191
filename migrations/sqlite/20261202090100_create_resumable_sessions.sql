-- The gate's one exception after assistant output (the spec's resumable retry guarantee): a
-- route whose current prompt generation produced output in an ACP agent session that the agent
-- can load again. While the row is in force (same route cycle), a retry of that candidate loads
-- this very session instead of starting a new one, and no other candidate is started on the
-- same prompt generation. Written by the acp dispatcher before it reports the failure; removed
-- on a success, when a new cycle begins, and with the route.
CREATE TABLE resumable_sessions (
    route_id     TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    candidate_id TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    -- The invocation generation of the attempt whose output the session holds.
    generation   INTEGER NOT NULL,
    -- The route cycle it belongs to.
    cycle        INTEGER NOT NULL,
    -- SHA-256 of the work (prompt and working directory) it answered: new work, new generation.
    work_digest  TEXT NOT NULL,
    recorded_at  TEXT NOT NULL
);
