// The UI shell is server-rendered and then hydrated: what can work as served does before the
// WASM arrives (the routes page's disclosure), interactions that need the WASM work once it has,
// at a desktop and at phone sizes, with no horizontal overflow on the phone.

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
  test(`the disclosure on the routes page works as served, before the WASM, and stays as the person left it once hydrated (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      // Hold the WASM back, so the page can be seen (and tapped) as served, before hydration.
      let loadWasm;
      const wasmAllowed = new Promise((ok) => {
        loadWasm = ok;
      });
      await page.route('**/pkg/**/*.wasm', async (route) => {
        await wasmAllowed;
        await route.continue();
      });
      await page.goto(BASE_URL, { waitUntil: 'domcontentloaded' });
      // The server-rendered page already shows its content before any WASM runs, closed.
      await page.getByRole('heading', { name: 'Routes', level: 1 }).waitFor();
      // A native disclosure: the browser opens and closes it and tells assistive technology
      // whether it is expanded (the `open` state of its `<details>`).
      const toggle = page.locator('summary').filter({ hasText: /How Recourse decides/ });
      const expanded = () => toggle.evaluate((summary) => summary.parentElement.open);
      const panel = page.locator('#how-recourse-decides');
      const explanation = page.getByText('Only a current failure that happened before any output');
      const hydrated = page.locator('#app[data-hydrated="true"]');
      await toggle.waitFor();
      assert.equal(await hydrated.count(), 0, 'not hydrated while the WASM is held');
      assert.equal(await expanded(), false);
      assert.equal(await panel.isVisible(), false, 'the panel is closed as served');
      // Before hydration a tap already opens it, and another closes it.
      await toggle.click();
      assert.equal(await expanded(), true, 'opens before hydration');
      await explanation.waitFor({ state: 'visible' });
      await toggle.click();
      assert.equal(await expanded(), false, 'closes before hydration');
      assert.equal(await panel.isVisible(), false);
      await toggle.click();
      assert.equal(await hydrated.count(), 0, 'still not hydrated after the taps');

      loadWasm();
      await waitHydrated(page);
      assert.equal(await expanded(), true, 'hydration keeps it open as the person left it');
      await explanation.waitFor({ state: 'visible' });
      await toggle.click();
      assert.equal(await expanded(), false, 'closes once hydrated');
      assert.equal(await panel.isVisible(), false);
      await toggle.click();
      assert.equal(await expanded(), true, 'opens again once hydrated');
      await explanation.waitFor({ state: 'visible' });
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
    // Exactly the navigation's link: a profile another test named "Routes …" links too.
    await page.getByRole('link', { name: 'Routes', exact: true }).click();
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
