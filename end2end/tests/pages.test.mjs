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
      name: 'profile-edit',
      path: `/profiles/${profile.body.id}/edit`,
      ready: { role: 'button', name: /Edit policies for claude-main/ },
      open: /Edit policies for claude-main/,
    },
    { name: 'profile', path: `/profiles/${profile.body.id}`, ready: { role: 'link', name: 'Edit profile' } },
    { name: 'profile-new', path: '/profiles/new', ready: { role: 'button', name: 'Create profile' } },
    { name: 'route', path: `/routes/${routeId}`, ready: { role: 'heading', name: 'History' } },
    { name: 'notifications', path: '/notifications', ready: { role: 'heading', name: 'Notifications' } },
    { name: 'not-found', path: '/no/such/page', ready: { role: 'heading', name: 'Page not found' } },
    { name: 'missing-profile', path: '/profiles/no-such-profile', ready: { role: 'heading', name: 'Not found' } },
    { name: 'routes-all', path: '/?state=all', ready: { role: 'heading', name: 'Routes' } },
    { name: 'access', path: '/access', ready: { role: 'heading', name: 'Roles' } },
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

test('keyboard focus reaches every control of the profile editor, each with a visible ring', async () => {
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}${pages[2].path}`);
    await waitHydrated(page);
    // Walk the page with Tab alone, from the top, until focus leaves the page after the last
    // control. The candidate's policies are opened from the keyboard on the way, so the walk
    // covers the controls inside them too. Each stop is marked in the page.
    const stops = [];
    for (let press = 0; press < 300; press++) {
      await page.keyboard.press('Tab');
      const at = await page.evaluate(() => {
        const el = document.activeElement;
        if (!el || el === document.body || el === document.documentElement) return null;
        const again = el.hasAttribute('data-focus-walk');
        el.setAttribute('data-focus-walk', '');
        const s = getComputedStyle(el);
        return {
          what: `${el.tagName.toLowerCase()} ${el.id || (el.getAttribute('aria-label') ?? el.textContent).trim().slice(0, 40)}`,
          ring: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
          again,
          opens: el.getAttribute('aria-expanded') === 'false' && /^Edit policies/.test(el.textContent.trim()),
        };
      });
      if (at === null || at.again) break;
      stops.push(at);
      if (at.opens) {
        await page.keyboard.press('Enter');
        assert.equal(
          await page.evaluate(() => document.activeElement.getAttribute('aria-expanded')),
          'true',
          `Enter opens ${at.what}`,
        );
      }
    }
    assert.ok(stops.length > 0, 'Tab moved focus onto a control');
    assert.deepEqual(
      stops.filter((s) => !s.ring).map((s) => s.what),
      [],
      'every control shows a focus ring of at least 2 px when focused from the keyboard',
    );
    // Every control a keyboard can reach (focusable, enabled, shown, not taken out of the
    // order with tabindex=-1) was a stop of the walk: none skipped, none unreachable.
    const missed = await page.evaluate(() => {
      const selector = 'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])';
      return [...document.querySelectorAll(selector)]
        .filter((el) => {
          if (el.disabled || el.tabIndex < 0 || el.closest('[hidden], [inert]')) return false;
          const r = el.getBoundingClientRect();
          return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden';
        })
        .filter((el) => !el.hasAttribute('data-focus-walk'))
        .map((el) => el.outerHTML.slice(0, 120));
    });
    assert.deepEqual(missed, [], 'controls the keyboard never reached');
    // And by name, the ones this page is for.
    const named = [
      page.getByRole('textbox', { name: 'Profile name' }),
      page.getByRole('textbox', { name: 'Candidate 1 id' }),
      page.getByRole('button', { name: /Hide policies for claude-main/ }),
      page.getByRole('switch').first(),
      page.getByRole('combobox').first(),
      page.getByRole('textbox', { name: 'Add a candidate (its id)' }),
      page.getByRole('button', { name: 'Add candidate' }),
      page.getByRole('button', { name: 'Save profile' }),
    ];
    for (const control of named) {
      assert.ok((await control.count()) > 0, `${control} exists`);
      assert.equal(await control.evaluate((el) => el.hasAttribute('data-focus-walk')), true, `focus landed on ${control}`);
    }
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
