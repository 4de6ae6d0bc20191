// Test data set up through the REST API, shared by the browser tests.

import assert from 'node:assert/strict';
import { api, unique } from './browser.mjs';

const OVERLOADED = {
  phase: 'prompt',
  effects: { prompt_delivery: 'confirmed' },
  items: [
    {
      kind: 'http',
      status: 529,
      body: '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
    },
  ],
};

const OFF = {
  retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
  wait_for_reset: { enabled: false, max_wait_seconds: 0 },
  on_exhausted: 'skip',
};

/** A profile whose simulated candidate fails as overloaded, with a 10-minute first retry. */
export async function routeInRetryWait(reference) {
  const a = unique('sim-a');
  const b = unique('sim-b');
  // A provider of its own, so a circuit opened by another test's failure never makes this
  // route's candidates ineligible.
  const provider = unique('provider');
  const target = (id, outcome) => ({
    id,
    dispatcher: 'simulated',
    provider_id: provider,
    script: [outcome === 'fail' ? { outcome, envelope: OVERLOADED } : { outcome }],
  });
  const profile = await api('/api/v1/profiles', {
    method: 'POST',
    body: {
      name: unique('Routes e2e'),
      targets: [target(a, 'fail'), target(b, 'hang')],
      policy: {
        version: 1,
        candidates: [
          {
            id: a,
            transient: { ...OFF, retry: { enabled: true, max_retries: 3, initial_interval_seconds: 600 } },
            hard: OFF,
          },
          { id: b, transient: OFF, hard: OFF },
        ],
      },
    },
  });
  assert.equal(profile.status, 201, JSON.stringify(profile.body));
  const started = await api('/api/v1/routes', {
    method: 'POST',
    body: {
      profile_id: profile.body.id,
      caller: { kind: 'office', reference, invocation_id: unique('inv') },
      title: `Office assignment ${reference}`,
    },
  });
  assert.ok(started.status === 200 || started.status === 201, JSON.stringify(started.body));
  const id = started.body.id;
  // The simulated failure is reported at once; the route settles in retry_wait.
  let route;
  for (let i = 0; i < 200; i++) {
    route = await api(`/api/v1/routes/${id}`);
    if (route.body?.route?.snapshot?.state === 'retry_wait') break;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.equal(route.body.route.snapshot.state, 'retry_wait', JSON.stringify(route.body.route.snapshot));
  return { id, candidate: a, snapshot: route.body.route.snapshot };
}
