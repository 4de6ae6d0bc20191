-- The work a route carries (design contract 7): the prompt and working directory for agents,
-- the messages and parameters for HTTP calls. Stored apart from evidence and history, replaced
-- by each new prompt generation, deleted with its route.
CREATE TABLE route_work (
    route_id   TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    work_json  TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
