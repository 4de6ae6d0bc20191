// The UI shell is server-rendered and then hydrated: interactions that need the WASM work at
// a desktop and at phone sizes, with no horizontal overflow on the phone.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, waitHydrated, screenshot, documentOverflow, authHeaders, BASE_URL } from '../lib/browser.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

for (const viewport of ['desktop', 'phone', 'small-phone']) {
  test(`the disclosure on the routes page opens only once hydrated (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      // Hold the WASM back, so the page can be seen (and clicked) as served, before hydration.
      let loadWasm;
      const wasmAllowed = new Promise((ok) => {
        loadWasm = ok;
      });
      await page.route('**/pkg/*.wasm', async (route) => {
        await wasmAllowed;
        await route.continue();
      });
      await page.goto(BASE_URL, { waitUntil: 'domcontentloaded' });
      // The server-rendered page already shows its content before any WASM runs, closed.
      await page.getByRole('heading', { name: 'Routes', level: 1 }).waitFor();
      const toggle = page.getByRole('button', { name: /How Recourse decides/ });
      const panel = page.locator('#how-recourse-decides');
      const hydrated = page.locator('#app[data-hydrated="true"]');
      await toggle.waitFor();
      assert.equal(await hydrated.count(), 0, 'not hydrated while the WASM is held');
      assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
      assert.equal(await panel.isVisible(), false, 'the panel is closed as served');
      // Before hydration the button does nothing: it stays closed.
      await toggle.click();
      assert.equal(await toggle.getAttribute('aria-expanded'), 'false', 'inert before hydration');
      assert.equal(await panel.isVisible(), false, 'still closed before hydration');
      assert.equal(await hydrated.count(), 0, 'still not hydrated after the click');

      loadWasm();
      await waitHydrated(page);
      assert.equal(await toggle.getAttribute('aria-expanded'), 'false', 'hydration keeps it closed');
      assert.equal(await panel.isVisible(), false);
      await toggle.click();
      assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
      await page.getByText('Only a current failure that happened before any output').waitFor({ state: 'visible' });
      assert.ok((await documentOverflow(page)) <= 0, 'no horizontal overflow');
      await screenshot(page, `routes-${viewport}`);
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('on a phone the menu button reveals the navigation and client-side routing works', async () => {
  const { context, page, errors } = await openPage(browser, 'phone');
  try {
    await page.goto(BASE_URL);
    await waitHydrated(page);
    const profilesLink = page.getByRole('link', { name: 'Profiles' });
    assert.equal(await profilesLink.isVisible(), false, 'links are folded on a phone');
    const menu = page.getByRole('button', { name: 'Menu' });
    const box = await menu.boundingBox();
    assert.ok(box.height >= 44, `menu button is ${box.height}px tall`);
    await menu.click();
    assert.equal(await page.getByRole('button', { name: 'Close menu' }).getAttribute('aria-expanded'), 'true');
    await profilesLink.click();
    await page.getByRole('heading', { name: 'Profiles', level: 1 }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/profiles');
    assert.equal(await profilesLink.isVisible(), false, 'the menu folds again after navigating');
    await screenshot(page, 'profiles-phone');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('desktop shows the navigation without a menu button', async () => {
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/profiles`);
    await waitHydrated(page);
    assert.equal(await page.getByRole('button', { name: 'Menu' }).isVisible(), false);
    await page.getByRole('link', { name: 'Routes' }).click();
    await page.getByRole('heading', { name: 'Routes', level: 1 }).waitFor();
    await screenshot(page, 'profiles-desktop');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('an unknown address shows a not-found page with status 404', async () => {
  const res = await fetch(`${BASE_URL}/no/such/page`, { headers: authHeaders() });
  assert.equal(res.status, 404);
  assert.match(await res.text(), /Page not found/);
});
