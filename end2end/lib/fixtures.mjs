// Test data set up through the REST API, shared by the browser tests.

import assert from 'node:assert/strict';
import { api, unique, authHeaders, BASE_URL } from './browser.mjs';

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
  // Listen to the event stream before the route exists, so its move to retry_wait cannot
  // happen unseen; then wait for that event instead of polling the route.
  const events = await openEvents();
  try {
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
    const snapshot = await events.until(id, 'retry_wait');
    return { id, candidate: a, snapshot };
  } finally {
    events.close();
  }
}

/**
 * The server's route event stream (`/api/v1/events`), read from the moment the response
 * headers arrive (the server subscribes before it answers, so no later event is missed).
 * `until(routeId, state)` resolves with the route's snapshot once an event moves it to
 * `state`; if the stream reports that it dropped events (`lagged`), or the route got there
 * before the id was known, the route itself is read once, so nothing is waited for twice.
 */
export async function openEvents({ timeoutMs = 10000 } = {}) {
  const abort = new AbortController();
  const res = await fetch(`${BASE_URL}/api/v1/events`, {
    headers: { accept: 'text/event-stream', ...authHeaders() },
    signal: abort.signal,
  });
  assert.equal(res.status, 200, 'the event stream answers');
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const seen = []; // parsed `route` events not yet consumed
  let lagged = false;
  let buffer = '';

  async function next() {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) name = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (name === 'lagged') lagged = true;
        else if (data.length && (name === 'route' || name === 'message')) {
          try {
            seen.push(JSON.parse(data.join('\n')));
          } catch {
            // not a route event
          }
        }
        return true;
      }
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value.replace(/\r\n?/g, '\n');
    }
  }

  async function current(routeId) {
    const route = await api(`/api/v1/routes/${routeId}`);
    return route.body?.route?.snapshot;
  }

  async function until(routeId, state) {
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      const before = await current(routeId);
      if (before?.state === state) return before;
      for (;;) {
        const hit = seen.find((e) => (e.route_id ?? e.snapshot?.route_id) === routeId && e.to === state);
        if (hit) return hit.snapshot;
        seen.length = 0;
        if (lagged) {
          lagged = false;
          const now = await current(routeId);
          if (now?.state === state) return now;
        }
        if (!(await next())) throw new Error(`the event stream ended before route ${routeId} reached ${state}`);
      }
    } catch (err) {
      const now = await current(routeId);
      throw new Error(`route ${routeId} did not reach ${state} (now ${JSON.stringify(now)}): ${err.message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  return { until, close: () => abort.abort() };
}
