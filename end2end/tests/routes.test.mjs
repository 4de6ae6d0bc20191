// A route in retry_wait on its page: deadline in local time and UTC, a countdown that only
// displays, manual actions fenced by generation, a conflict that shows the fresh state, and
// changes arriving live over the event stream without a reload.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, waitHydrated, screenshot, api, unique, BASE_URL } from '../lib/browser.mjs';
import { routeInRetryWait } from '../lib/fixtures.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

for (const viewport of ['desktop', 'phone', 'small-phone']) {
  test(`a route in retry_wait shows its deadline and countdown, and moves live (${viewport})`, async () => {
    const reference = unique(`task-${viewport}`);
    const { id, snapshot } = await routeInRetryWait(reference);
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      await page.goto(`${BASE_URL}/routes/${id}`);
      const now = page.getByTestId('route-now');
      // Server-rendered: state, class, cause, ordinal, UTC deadline, before any WASM runs.
      await now.getByText('Waiting to retry').waitFor();
      assert.equal((await page.getByTestId('route-class').textContent()).trim(), 'Transient error');
      assert.match(await page.getByTestId('route-cause').textContent(), /The provider is overloaded\s*provider_overloaded/);
      assert.equal((await page.getByTestId('route-retry').textContent()).trim(), 'retry 1 of 3');
      const deadline = new Date(snapshot.deadline);
      const utc = deadline.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
      assert.equal((await page.getByTestId('deadline-utc').textContent()).trim(), utc);
      await waitHydrated(page);
      // Live: local time and a ticking countdown.
      await page.getByTestId('live-status').getByText(/^Live:/).waitFor();
      const countdown = page.getByTestId('countdown');
      const first = (await countdown.textContent()).trim();
      assert.match(first, /^in (9|10) min \d\d s$/);
      await page.waitForFunction(
        (before) => document.querySelector('[data-testid=countdown]').textContent.trim() !== before,
        first,
      );
      assert.notEqual((await page.getByTestId('deadline-local').textContent()).trim(), 'appears when the page is live');
      assert.match(await page.getByTestId('route-next').textContent(), /retry 1 of 3 on/);
      await screenshot(page, `route-retry-wait-${viewport}`);

      // Someone else acts first (through the API): the page follows live, without a reload.
      const skip = await api(`/api/v1/routes/${id}/actions`, {
        method: 'POST',
        body: { action: 'cancel_wait', expected_generation: snapshot.generation },
      });
      assert.equal(skip.status, 200, JSON.stringify(skip.body));
      await now.locator('[data-state=action_required]').waitFor();
      await page.getByText('A person cancelled the pending wait.').first().waitFor();

      // The page's own action: Retry now from action_required moves the route on.
      await page.getByRole('button', { name: 'Retry now' }).click();
      await page.getByTestId('action-note').getByText(/^Done\. The route is now:/).waitFor();
      await page.waitForFunction(() => !document.querySelector('[data-testid=route-now] [data-state=action_required]'));
      await screenshot(page, `route-after-action-${viewport}`);
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('a stale action gets a conflict that shows the fresh state and says what happened', async () => {
  const { id, snapshot } = await routeInRetryWait(unique('conflict'));
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    // Keep the page from hearing about the change, so it acts on the generation it showed.
    await page.route('**/api/v1/events', (route) => route.abort());
    await page.goto(`${BASE_URL}/routes/${id}`);
    await waitHydrated(page);
    await page.getByTestId('route-now').getByText('Waiting to retry').waitFor();
    const moved = await api(`/api/v1/routes/${id}/actions`, {
      method: 'POST',
      body: { action: 'stop', expected_generation: snapshot.generation },
    });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    await page.getByRole('button', { name: 'Skip now' }).click();
    const note = page.getByTestId('action-note');
    await note.getByText(/The route changed before your action arrived/).waitFor();
    await note.getByText(/Current state: Needs a person/).waitFor();
    await page.getByTestId('route-now').locator('[data-state=action_required]').waitFor();
    await screenshot(page, 'route-conflict-desktop');
    // The 409 and the blocked stream are logged by Chromium; nothing else may appear.
    assert.deepEqual(errors.filter((e) => !/Failed to load resource|EventSource|net::ERR_FAILED/.test(e)), []);
  } finally {
    await context.close();
  }
});

test('the routes list filters by caller and state through the address', async () => {
  const reference = unique('listed');
  const { id } = await routeInRetryWait(reference);
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/?caller=office&state=retry_wait&reference=${reference}`);
    await waitHydrated(page);
    const list = page.getByTestId('route-list');
    await list.locator(`[data-route-id="${id}"]`).waitFor();
    assert.equal(await list.locator('li[data-route-id]').count(), 1);
    // Change the filter in the form: no route of this reference is completed.
    await page.getByLabel('State').selectOption('completed');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.getByRole('heading', { name: 'No routes match this filter' }).waitFor();
    assert.match(page.url(), /state=completed/);
    await screenshot(page, 'routes-filtered-desktop');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('the routes list shows open routes by default, all on request, and the address keeps the choice', async () => {
  const reference = unique('scope');
  const open = await routeInRetryWait(reference);
  const finished = await routeInRetryWait(reference);
  const abandoned = await api(`/api/v1/routes/${finished.id}/abandon`, {
    method: 'POST',
    body: { expected_generation: finished.snapshot.generation },
  });
  assert.equal(abandoned.status, 200, JSON.stringify(abandoned.body));
  const { context, page, errors } = await openPage(browser, 'desktop');
  const listed = async () =>
    (await page.getByTestId('route-list').locator('li[data-route-id]').evaluateAll((els) => els.map((e) => e.dataset.routeId))).sort();
  try {
    // No state in the address: open routes only, and the filter says so.
    await page.goto(`${BASE_URL}/?reference=${reference}`);
    await waitHydrated(page);
    await page.getByTestId('route-list').locator(`[data-route-id="${open.id}"]`).waitFor();
    assert.deepEqual(await listed(), [open.id]);
    assert.equal(await page.getByLabel('State').inputValue(), 'open');

    // "All" through the form: the abandoned route appears and the address says state=all.
    await page.getByLabel('State').selectOption('all');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.getByTestId('route-list').locator(`[data-route-id="${finished.id}"]`).waitFor();
    assert.deepEqual(await listed(), [open.id, finished.id].sort());
    assert.match(page.url(), /[?&]state=all(&|$)/);

    // A reload keeps the choice (the server renders it from the address).
    await page.reload();
    await page.getByTestId('route-list').locator(`[data-route-id="${finished.id}"]`).waitFor();
    assert.deepEqual(await listed(), [open.id, finished.id].sort());
    assert.equal(await page.getByLabel('State').inputValue(), 'all');
    await waitHydrated(page);

    // Back to open routes, explicitly.
    await page.getByLabel('State').selectOption('open');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.waitForURL(/[?&]state=open(&|$)/);
    await page.getByTestId('route-list').locator(`[data-route-id="${finished.id}"]`).waitFor({ state: 'detached' });
    assert.deepEqual(await listed(), [open.id]);
    await screenshot(page, 'routes-open-default-desktop');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
