-- The session that holds a route's output (the gate's one exception after assistant output) is
-- now a fact of the route's state, decided by the route's step (`policy::route::held`) and
-- committed with it. A session recorded for the route's current cycle becomes the state's
-- `held`; one of an earlier cycle was no longer in force. Then the table goes.
UPDATE routes
SET state_json = json_set(state_json, '$.held', json_object(
        'session_id', rs.session_id,
        'agent_id', rs.agent_id,
        'candidate_id', rs.candidate_id,
        'work_digest', rs.work_digest,
        'generation', rs.generation))
FROM resumable_sessions AS rs
WHERE rs.route_id = routes.id
  AND json_extract(routes.state_json, '$.cycle.number') = rs.cycle;

DROP TABLE resumable_sessions;
