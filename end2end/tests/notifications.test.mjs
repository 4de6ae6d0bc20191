// Notifications in the browser: a route stops for a person while the signed-in person has the
// notifications page open, and without a reload the list shows it, the header's unread count
// goes up, and (the person having allowed it) the browser shows its own notification, once.
// "Mark all as read" clears the count.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, waitHydrated, api, unique, BASE_URL } from '../lib/browser.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

const OFF = {
  retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
  wait_for_reset: { enabled: false, max_wait_seconds: 0 },
  on_exhausted: 'stop',
};

// Runs before the app's scripts: records every browser notification the page makes.
function recordNotifications() {
  const shown = [];
  class Recorded {
    static get permission() {
      return 'granted';
    }
    static requestPermission(cb) {
      cb?.('granted');
      return Promise.resolve('granted');
    }
    constructor(title, options) {
      shown.push({ title, body: options?.body, tag: options?.tag });
    }
  }
  window.Notification = Recorded;
  window.__shown = () => shown;
  window.__loadedOnce = Math.random();
}

async function unreadInHeader(page) {
  const badge = page.getByTestId('unread-count');
  if (await badge.isHidden()) return 0;
  return Number(await badge.textContent());
}

test('a route that stops for a person shows up on the open page without a reload', async () => {
  // An external candidate: the attempt waits for a report, which the test sends as evidence.
  const profile = await api('/api/v1/profiles', {
    method: 'POST',
    body: {
      name: unique('Notified'),
      targets: [{ id: 'main', dispatcher: 'external' }],
      policy: { version: 1, candidates: [{ id: 'main', transient: OFF, hard: OFF }] },
      notifications: [{ events: ['route.needs_person'], channels: ['in_app'] }],
    },
  });
  assert.equal(profile.status, 201, JSON.stringify(profile.body));
  const started = await api('/api/v1/routes', {
    method: 'POST',
    body: {
      profile_id: profile.body.id,
      caller: { kind: 'kanban_task', reference: unique('task'), invocation_id: unique('inv') },
      title: 'Notify me',
    },
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const routeId = started.body.id;

  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.addInitScript(recordNotifications);
    await page.goto(`${BASE_URL}/notifications`);
    await page.getByRole('heading', { name: 'Notifications', level: 1 }).waitFor();
    await waitHydrated(page);
    await page.getByTestId('live-status').getByText(/^Live:/).waitFor();
    const loaded = await page.evaluate(() => window.__loadedOnce);
    const before = await unreadInHeader(page);

    // The route stops for a person (evidence nobody knows).
    const route = await api(`/api/v1/routes/${routeId}`);
    const evidence = await api(`/api/v1/routes/${routeId}/evidence`, {
      method: 'POST',
      body: {
        generation: route.body.route.snapshot.generation,
        phase: 'prompt',
        items: [{ kind: 'stderr', lines: ['frobnicator jammed at stage 7'] }],
      },
    });
    assert.equal(evidence.status, 200, JSON.stringify(evidence.body));
    assert.equal(evidence.body.snapshot.state, 'action_required');

    const item = page.getByTestId('notification').filter({ has: page.locator(`a[href="/routes/${routeId}"]`) });
    await item.waitFor();
    assert.equal(await item.getAttribute('data-type'), 'route.needs_person');
    assert.equal(await item.getAttribute('data-read'), 'false');
    assert.ok(!(await item.textContent()).includes('frobnicator'), 'no evidence text');
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid="unread-count"]')?.textContent) === n, before + 1);
    assert.equal(await page.evaluate(() => window.__loadedOnce), loaded, 'the page was not reloaded');
    // The browser's own notification, once, tagged with the event's id.
    await page.waitForFunction(() => window.__shown().length > 0);
    const shown = await page.evaluate(() => window.__shown());
    assert.equal(shown.length, 1, JSON.stringify(shown));
    assert.ok(shown[0].body.includes(routeId), JSON.stringify(shown));

    await page.getByRole('button', { name: 'Mark all as read' }).click();
    await page.getByTestId('unread-summary').getByText('All read.').waitFor();
    assert.equal(await item.getAttribute('data-read'), 'true');
    // The header's count follows without a reload.
    await page.waitForFunction(() => document.querySelector('[data-testid="unread-count"]')?.hidden === true);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
