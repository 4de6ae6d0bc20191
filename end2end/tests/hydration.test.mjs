// The UI shell is server-rendered and then hydrated: what can work as served does before the
// WASM arrives (the routes page's disclosure), interactions that need the WASM work once it has,
// at a desktop and at phone sizes, with no horizontal overflow on the phone.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch,
  openPage,
  waitHydrated,
  screenshot,
  documentOverflow,
  authHeaders,
  api,
  unique,
  BASE_URL,
} from '../lib/browser.mjs';

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

/** Records every title the page sets (the setter WASM's glue calls) in `window.__titles`, and
 * the title the next task after each sees in `window.__titlesSeen`: what a screen reader, axe or
 * the browser's tab can meet. (leptos_meta sets an empty title for an instant when the shell
 * hydrates, and the shell's own in the same task; only a title that lasts into another task is
 * seen.) The first title set says the shell has hydrated. */
async function recordTitles(context) {
  await context.addInitScript(() => {
    const title = Object.getOwnPropertyDescriptor(Document.prototype, 'title');
    window.__titles = [];
    window.__titlesSeen = [];
    Object.defineProperty(Document.prototype, 'title', {
      configurable: true,
      get() {
        return title.get.call(this);
      },
      set(value) {
        window.__titles.push(String(value));
        title.set.call(this, value);
        setTimeout(() => window.__titlesSeen.push(title.get.call(document)), 0);
      },
    });
  });
}

/** Lets the shell's WASM load and holds every later one (the page's pieces) until the returned
 * function is called, so the moment between the shell's hydration and the page's is held open. */
async function holdPieces(page) {
  let wasms = 0;
  let release;
  const allowed = new Promise((ok) => {
    release = ok;
  });
  await page.route('**/pkg/**/*.wasm', async (route) => {
    wasms += 1;
    if (wasms > 1) await allowed;
    await route.continue();
  });
  return release;
}

// Every page is a lazy route: the shell hydrates first, and the page's code (with its `<Title>`)
// arrives after it. The document must have a title all along, the served one until the page's
// registers; an empty one is what a screen reader or axe meets in between (leptos_meta sets the
// title from the titles registered so far, and the shell's alone has no text).
for (const [name, path] of [['routes', '/'], ['missing-profile', '/profiles/no-such-profile']]) {
  test(`the document keeps a title while the page's code loads after hydration (${name})`, async () => {
    const { context, page, errors } = await openPage(browser, 'desktop');
    try {
      await recordTitles(context);
      const releasePieces = await holdPieces(page);
      // The title the server renders for the page (the shell may hydrate before the document's
      // load event, so it is read from the served HTML, not from the page).
      const html = await (await page.request.get(`${BASE_URL}${path}`)).text();
      const served = html.match(/<title>([^<]*)<\/title>/)?.[1] ?? '';
      assert.ok(served.endsWith(' · Recourse'), `the served page names itself: "${served}"`);
      await page.goto(`${BASE_URL}${path}`, { waitUntil: 'domcontentloaded' });
      // The shell has hydrated (or, should it wait for the page's code, at least set a title).
      await page.waitForFunction(
        () => window.__titles.length > 0 || document.querySelector('#app[data-hydrated="true"]'),
        null,
        { timeout: 15000 },
      );
      assert.ok((await page.title()).trim().length > 0, 'a title while the page\'s code is held back');
      releasePieces();
      await waitHydrated(page);
      await page.waitForFunction((want) => document.title === want, served, { timeout: 15000 });
      const { set, seen } = await page.evaluate(() => ({ set: window.__titles, seen: window.__titlesSeen }));
      assert.ok(seen.length > 0, 'the titles set were seen');
      assert.deepEqual(
        seen.filter((t) => t.trim() === ''),
        [],
        `no empty title seen on the way: seen ${JSON.stringify(seen)}, set ${JSON.stringify(set)}`,
      );
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

// `data-hydrated` (what every test waits for before it taps) says the page is live: its own
// code has arrived and hydrated it, not just the shell. It flipped with the shell alone once,
// so a tap right after it, while the page's piece was still on its way (two browsers and two
// servers on two cores were enough), reached a button with no handler yet and was lost.
test('a page is live only once its own code has hydrated it, and a tap right after works', async () => {
  const name = unique('Live');
  const off = {
    retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
    wait_for_reset: { enabled: false, max_wait_seconds: 0 },
    on_exhausted: 'skip',
  };
  const created = await api('/api/v1/profiles', {
    method: 'POST',
    body: { name, policy: { version: 1, candidates: [{ id: 'only', transient: off, hard: off }] } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { context, page, errors } = await openPage(browser, 'phone');
  try {
    // The shell's hydration is seen by the first title it sets; the page's pieces wait.
    await recordTitles(context);
    const releasePieces = await holdPieces(page);
    await page.goto(`${BASE_URL}/profiles`, { waitUntil: 'domcontentloaded' });
    await page.waitForFunction(() => window.__titles.length > 0, null, { timeout: 15000 });
    const hydrated = page.locator('#app[data-hydrated="true"]');
    assert.equal(await hydrated.count(), 0, 'the shell has hydrated, the page has not: not live yet');

    releasePieces();
    await waitHydrated(page);
    // At once, as every test does: the row's Delete asks its question.
    const row = page.locator(`li[data-profile-id="${created.body.id}"]`);
    await row.getByRole('button', { name: `Delete profile ${name}` }).click();
    const keep = row.getByRole('button', { name: 'Keep it' });
    await keep.waitFor({ state: 'visible', timeout: 5000 });
    await keep.click();
    await row.getByRole('button', { name: `Delete profile ${name}` }).waitFor({ state: 'visible' });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
