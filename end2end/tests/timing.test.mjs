// How long a person waits, in headless Chromium on this machine, from navigation until the page
// is live: hydrated, so every control the WASM drives answers (links, forms and the "How
// Recourse decides" disclosure already work as served). The goal is 1 s; like every speed goal
// it is measured and reported (printed, and written to end2end/artifacts/timing.json), not
// asserted: on a busy 2-core machine a timed assertion near the goal would fail for reasons
// that are not the app's. What is asserted is only a sanity bound, 15 s per run, which a
// working page never comes near: past it the page is taken as never hydrated (hydration broken).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, BASE_URL, ARTIFACTS } from '../lib/browser.mjs';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

const GOAL_MS = 1000;
const SANITY_BOUND_MS = 15000;

test('time to a live (hydrated) page is measured against the 1 s goal (asserted: hydrated within a 15 s sanity bound)', async () => {
  const samples = [];
  for (let run = 0; run < 5; run++) {
    const { context, page } = await openPage(browser, 'desktop');
    try {
      // The moment the app marks itself hydrated, read in the page relative to the start of
      // navigation (the mark is set by an effect, which only runs once the WASM has hydrated).
      await context.addInitScript(() => {
        new MutationObserver(() => {
          if (!window.__hydratedAt && document.querySelector('#app[data-hydrated="true"]')) {
            window.__hydratedAt = performance.now();
          }
        }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
      });
      await page.goto(BASE_URL, { waitUntil: 'commit' });
      const handle = await page.waitForFunction(() => window.__hydratedAt ?? false, null, {
        polling: 5,
        timeout: SANITY_BOUND_MS,
      });
      samples.push(await handle.jsonValue());
    } finally {
      await context.close();
    }
  }
  samples.sort((a, b) => a - b);
  const median = samples[Math.floor(samples.length / 2)];
  const verdict = median <= GOAL_MS ? 'meets' : 'MISSES';
  console.log(
    `time from navigation to a hydrated page: median ${median.toFixed(0)} ms, ${verdict} the ` +
      `${GOAL_MS} ms goal (runs: ${samples.map((s) => s.toFixed(0)).join(', ')} ms; the first run has a cold cache)`,
  );
  mkdirSync(ARTIFACTS, { recursive: true });
  writeFileSync(
    join(ARTIFACTS, 'timing.json'),
    `${JSON.stringify({ what: 'navigation to a hydrated page', goal_ms: GOAL_MS, median_ms: median, runs_ms: samples })}\n`,
  );
  // Only the sanity bound is asserted (each run must have hydrated within it, which the wait
  // above enforces); the goal is reported, not asserted.
  assert.equal(samples.length, 5, 'every run hydrated');
  assert.ok(samples.every((s) => s < SANITY_BOUND_MS), `within the sanity bound: ${samples.join(', ')} ms`);
});
