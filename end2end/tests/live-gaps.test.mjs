// A live page never shows stale routes under a "live" label: when the event stream has a gap
// (the server's `lagged` notice that it dropped events for this page, or a stream that dropped
// and reconnected), the page reloads what it shows, and until that reload has landed the
// status line says it is catching up. The routes change behind the page's back through the
// REST API, so only the reload can bring the change in.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, waitHydrated, api, unique, BASE_URL } from '../lib/browser.mjs';
import { routeInRetryWait } from '../lib/fixtures.mjs';
import { controllableEventSource, holdable, inFlight } from '../lib/live.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

const LIVE = /^Live:/;
const CATCHING_UP = /^Catching up: reloading/;
const RECONNECTING = /reconnecting/;

/** Stops the route's wait through the REST API: it moves to action_required. */
async function cancelWait(id, generation) {
  const moved = await api(`/api/v1/routes/${id}/actions`, {
    method: 'POST',
    body: { action: 'cancel_wait', expected_generation: generation },
  });
  assert.equal(moved.status, 200, JSON.stringify(moved.body));
  assert.equal(moved.body.state, 'action_required', JSON.stringify(moved.body));
}

test('a lagged notice reloads the route page, which says it is catching up until the reload lands', async () => {
  const { id, snapshot } = await routeInRetryWait(unique('lagged-route'));
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.addInitScript(controllableEventSource);
    const reloads = await holdable(page, '**/api/ui/get_route*');
    const requests = inFlight(page, '/api/ui/get_route');
    await page.goto(`${BASE_URL}/routes/${id}`);
    await waitHydrated(page);
    const status = page.getByTestId('live-status');
    const now = page.getByTestId('route-now');
    await status.getByText(LIVE).waitFor();
    await requests.idle();

    // The server drops the route's change for this page (a slow client's lost events). The
    // page stays deaf to route events to the end, so only the notice can make it reload.
    await page.evaluate(() => {
      window.__live.deaf = true;
    });
    await cancelWait(id, snapshot.generation);
    await page.waitForFunction((id) => window.__live.missed(id, 'action_required'), id);
    assert.equal(await now.locator('[data-state=retry_wait]').count(), 1, 'nothing told the page yet');

    // Then it says so: `event: lagged`. The reload is held, to see what the page says meanwhile.
    reloads.hold();
    assert.equal(await page.evaluate(() => window.__live.lagged(1)), 1, 'one open stream got the notice');
    await status.getByText(CATCHING_UP).waitFor();
    assert.equal(await now.locator('[data-state=retry_wait]').count(), 1, 'the old state is still shown, not as live');
    reloads.release();
    await now.locator('[data-state=action_required]').waitFor();
    await status.getByText(LIVE).waitFor();
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('after the event stream drops and reconnects, the route page reloads what changed while it was away', async () => {
  const { id, snapshot } = await routeInRetryWait(unique('reconnect-route'));
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    // The first stream opens and ends at once, as when the network drops it; its `retry`
    // asks the browser to reconnect soon. The reconnection waits until the test lets it
    // through to the real server.
    let connections = 0;
    let reconnect;
    const reconnectAllowed = new Promise((ok) => {
      reconnect = ok;
    });
    await page.route('**/api/v1/events', async (route) => {
      connections += 1;
      if (connections === 1) {
        await route.fulfill({
          status: 200,
          headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-store' },
          body: 'retry: 100\n\n',
        });
      } else {
        await reconnectAllowed;
        await route.continue();
      }
    });
    const reloads = await holdable(page, '**/api/ui/get_route*');
    const requests = inFlight(page, '/api/ui/get_route');
    await page.goto(`${BASE_URL}/routes/${id}`);
    await waitHydrated(page);
    const status = page.getByTestId('live-status');
    const now = page.getByTestId('route-now');
    await status.getByText(RECONNECTING).waitFor();
    await requests.idle();
    assert.equal(connections >= 1, true);

    // While the page is not connected, the route moves.
    await cancelWait(id, snapshot.generation);
    assert.equal(await now.locator('[data-state=retry_wait]').count(), 1, 'nothing told the page yet');

    // The stream comes back: the page is connected but must not claim to be live until it has
    // reloaded.
    reloads.hold();
    reconnect();
    await status.getByText(CATCHING_UP).waitFor();
    assert.equal(await now.locator('[data-state=retry_wait]').count(), 1);
    reloads.release();
    await now.locator('[data-state=action_required]').waitFor();
    await status.getByText(LIVE).waitFor();
    assert.ok(connections >= 2, `the browser reconnected (${connections} connections)`);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a lagged notice reloads the routes list, so a route started unseen appears', async () => {
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.addInitScript(controllableEventSource);
    const requests = inFlight(page, '/api/ui/list_routes');
    await page.goto(`${BASE_URL}/?state=all`);
    await waitHydrated(page);
    const status = page.getByTestId('live-status');
    await status.getByText(LIVE).waitFor();
    await requests.idle();

    await page.evaluate(() => {
      window.__live.deaf = true;
    });
    const { id } = await routeInRetryWait(unique('lagged-list'));
    await page.waitForFunction((id) => window.__live.missed(id, 'retry_wait'), id);
    assert.equal(await page.locator(`[data-route-id="${id}"]`).count(), 0, 'nothing told the page yet');

    assert.equal(await page.evaluate(() => window.__live.lagged(3)), 1);
    await page.locator(`[data-route-id="${id}"]`).waitFor();
    await status.getByText(LIVE).waitFor();
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
