// Live pages own one event stream each, and give it back when they go: moving between route
// pages and the routes list many times leaves exactly one stream open (none off the live
// pages), and every stream that was closed has no listener or handler left attached, so the
// page's callbacks are not kept alive by the browser.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, waitHydrated, unique, BASE_URL } from '../lib/browser.mjs';
import { routeInRetryWait } from '../lib/fixtures.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

// Runs before the app's scripts: counts every EventSource, and the listeners and handlers
// attached to each, without changing what they do.
function countEventSources() {
  const all = [];
  const Native = window.EventSource;
  class Counted extends Native {
    constructor(...args) {
      super(...args);
      this.__listeners = 0;
      all.push(this);
    }
    addEventListener(type, fn, opts) {
      this.__listeners += 1;
      return super.addEventListener(type, fn, opts);
    }
    removeEventListener(type, fn, opts) {
      this.__listeners -= 1;
      return super.removeEventListener(type, fn, opts);
    }
  }
  window.EventSource = Counted;
  window.__eventSources = () => ({
    created: all.length,
    open: all.filter((es) => es.readyState !== EventSource.CLOSED).length,
    // Closed streams that still hold a callback of the page.
    closedHolding: all.filter(
      (es) => es.readyState === EventSource.CLOSED && (es.__listeners !== 0 || es.onopen || es.onerror || es.onmessage),
    ).length,
  });
}

async function streams(page) {
  return page.evaluate(() => window.__eventSources());
}

test('moving between live pages keeps one event stream open and releases the others', async () => {
  const a = await routeInRetryWait(unique('live-a'));
  const b = await routeInRetryWait(unique('live-b'));
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.addInitScript(countEventSources);
    await page.goto(`${BASE_URL}/routes/${a.id}`);
    await waitHydrated(page);
    const live = page.getByTestId('live-status').getByText(/^Live:/);
    await live.waitFor();
    assert.deepEqual(await streams(page), { created: 1, open: 1, closedHolding: 0 });

    const rounds = 4;
    for (let i = 0; i < rounds; i++) {
      const target = i % 2 === 0 ? b.id : a.id;
      // Client-side navigation: the app stays loaded, so anything a page leaves behind adds up.
      await page.getByRole('link', { name: '← All routes' }).click();
      await page.getByRole('heading', { name: 'Routes', level: 1 }).waitFor();
      await live.waitFor();
      await page.locator(`[data-route-id="${target}"] a`).click();
      await page.waitForURL(`**/routes/${target}`);
      await page.getByRole('heading', { name: 'History' }).waitFor();
      await live.waitFor();
      const now = await streams(page);
      assert.equal(now.open, 1, `one stream open after round ${i + 1}: ${JSON.stringify(now)}`);
      assert.equal(now.closedHolding, 0, `closed streams hold no callbacks: ${JSON.stringify(now)}`);
    }
    // One stream per page visit: the first route page, then a list and a route page per round.
    assert.equal((await streams(page)).created, 1 + 2 * rounds);

    // A page without live updates keeps none open.
    await page.getByRole('link', { name: 'Profiles' }).first().click();
    await page.getByRole('heading', { name: 'Profiles', level: 1 }).waitFor();
    await page.waitForFunction(() => window.__eventSources().open === 0);
    assert.deepEqual(await streams(page), { created: 1 + 2 * rounds, open: 0, closedHolding: 0 });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
