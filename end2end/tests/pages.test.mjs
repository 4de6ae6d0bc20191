// Every page, at every viewport: axe-core finds no serious or critical violation, every
// control is at least 44 px tall, the phone sizes do not overflow, and a screenshot is saved
// as an artifact.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch,
  openPage,
  waitHydrated,
  screenshot,
  documentOverflow,
  seriousA11yViolations,
  shortControls,
  api,
  unique,
  BASE_URL,
  VIEWPORTS,
} from '../lib/browser.mjs';
import { routeInRetryWait } from '../lib/fixtures.mjs';

let browser;
let pages;
before(async () => {
  browser = await launch();
  const { id: routeId } = await routeInRetryWait(unique('pages'));
  const profile = await api('/api/v1/profiles', {
    method: 'POST',
    body: {
      name: unique('Pages'),
      policy: {
        version: 1,
        candidates: [
          {
            id: 'claude-main',
            transient: {
              retry: { enabled: true, max_retries: 3, initial_interval_seconds: 5 },
              wait_for_reset: { enabled: false, max_wait_seconds: 0 },
              on_exhausted: 'skip',
            },
            hard: {
              retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
              wait_for_reset: { enabled: true, max_wait_seconds: 300 },
              on_exhausted: 'stop',
            },
          },
        ],
      },
    },
  });
  assert.equal(profile.status, 201, JSON.stringify(profile.body));
  pages = [
    { name: 'routes', path: '/', ready: { role: 'heading', name: 'Routes' } },
    { name: 'profiles', path: '/profiles', ready: { role: 'heading', name: 'Profiles' } },
    {
      name: 'profile',
      path: `/profiles/${profile.body.id}`,
      ready: { role: 'button', name: /Edit policies for claude-main/ },
      open: /Edit policies for claude-main/,
    },
    { name: 'route', path: `/routes/${routeId}`, ready: { role: 'heading', name: 'History' } },
    { name: 'not-found', path: '/no/such/page', ready: { role: 'heading', name: 'Page not found' } },
    { name: 'missing-profile', path: '/profiles/no-such-profile', ready: { role: 'heading', name: 'Not found' } },
    { name: 'routes-all', path: '/?state=all', ready: { role: 'heading', name: 'Routes' } },
  ];
});
after(async () => {
  await browser?.close();
});

for (const viewport of Object.keys(VIEWPORTS)) {
  test(`every page passes axe-core, has 44 px controls and is captured (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      for (const p of pages) {
        await page.goto(`${BASE_URL}${p.path}`);
        await page.getByRole(p.ready.role, { name: p.ready.name }).first().waitFor();
        await waitHydrated(page);
        if (p.open) await page.getByRole('button', { name: p.open }).click();
        assert.deepEqual(await seriousA11yViolations(page), [], `${p.name} at ${viewport}`);
        assert.deepEqual(await shortControls(page), [], `${p.name} controls at ${viewport}`);
        if (viewport !== 'desktop') {
          assert.ok((await documentOverflow(page)) <= 0, `${p.name} overflows at ${viewport}`);
        }
        await screenshot(page, `page-${p.name}-${viewport}`);
      }
      // The 404 pages are HTTP errors by design; Chromium logs them.
      assert.deepEqual(errors.filter((e) => !/status of 404/.test(e)), []);
    } finally {
      await context.close();
    }
  });
}

test('keyboard focus is visible on every control of the profile page', async () => {
  const { context, page } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}${pages[2].path}`);
    await waitHydrated(page);
    await page.getByRole('button', { name: pages[2].open }).click();
    const unfocused = [];
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press('Tab');
      const ring = await page.evaluate(() => {
        const el = document.activeElement;
        if (!el || el === document.body) return null;
        const s = getComputedStyle(el);
        return {
          what: `${el.tagName} ${el.id || el.textContent.trim().slice(0, 30)}`,
          visible: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
        };
      });
      if (ring && !ring.visible) unfocused.push(ring.what);
    }
    assert.deepEqual(unfocused, []);
  } finally {
    await context.close();
  }
});
