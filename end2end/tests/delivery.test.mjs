// How the UI is delivered (issues 18 and 32): the Content-Security-Policy is in force, pages
// cannot be framed, a phone's first visit to every page stays within its byte budget (the
// shell and that page's own WASM piece), every further page's piece stays within its own, a
// second visit reuses the cache, and a reload revalidates the page instead of downloading it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, waitHydrated, authHeaders, api, unique, BASE_URL } from '../lib/browser.mjs';
import { routeInRetryWait } from '../lib/fixtures.mjs';

/** A phone's first visit to any page: the page, the shell's script, WASM and stylesheet, and
 * the page's own piece (issue 32's goal). The data a page asks the API for once it runs (a
 * route's page reloads the route when its event stream opens, the header lists the
 * notifications; about 2 KB) is printed beside it, not counted: whether those answers finish
 * before the last piece does is a matter of timing, and counting them made the figure vary by
 * their size from one run to the next. */
const FIRST_VISIT_BUDGET = 450_000;
/** The WASM pieces a further page brings, brotli-compressed (issue 32's goal). */
const FURTHER_PAGE_BUDGET = 60_000;
/** Pages over those goals today (README, "Bytes per page"): the profile editor's two pages
 * (`/profiles/:id/edit` and `/profiles/new`, one lazy route and one piece), each held to what it
 * measured on 2026-12-07 (the editor and the new-profile form split from the profile's page and
 * the list), plus 2 %, so it can only shrink until it meets the goal. The goal is not met for
 * them; each run prints by how much. Remove a page once it fits. */
const FIRST_VISIT_HELD = { 'profile-edit': 566_600, 'profile-new': 562_000 };
const FURTHER_PAGE_HELD = { 'profile-edit': 177_100 };
const firstVisitLimit = (page) => FIRST_VISIT_HELD[page] ?? FIRST_VISIT_BUDGET;
const furtherPageLimit = (page) => FURTHER_PAGE_HELD[page] ?? FURTHER_PAGE_BUDGET;
/** A second visit of a page, everything cached. */
const REPEAT_BUDGET = 20_000;

let browser;
/** Every page, with something on it: `{name, path, heading}`. */
let pages;
before(async () => {
  browser = await launch();
  const { id: routeId } = await routeInRetryWait(unique('delivery'));
  const profiles = await api('/api/v1/profiles');
  pages = [
    { name: 'routes', path: '/', heading: 'Routes' },
    { name: 'profiles', path: '/profiles', heading: 'Profiles' },
    { name: 'profile', path: `/profiles/${profiles.body[0].id}`, heading: 'Candidates' },
    { name: 'profile-edit', path: `/profiles/${profiles.body[0].id}/edit`, heading: 'Try an error' },
    { name: 'profile-new', path: '/profiles/new', heading: 'New profile' },
    { name: 'route', path: `/routes/${routeId}`, heading: 'Timeline' },
    { name: 'access', path: '/access', heading: 'New API token' },
    { name: 'audit', path: '/audit', heading: 'Audit log' },
    { name: 'notifications', path: '/notifications', heading: 'Notifications' },
  ];
});
after(async () => {
  await browser?.close();
});

/** Whether a request goes to the API (`/api/`: data and the event stream, not the page's files). */
const isApi = (url) => new URL(url).pathname.startsWith('/api/');

/**
 * Counts the bytes a page receives over the network (headers and bodies, as encoded) for the
 * requests that finish; the live event stream never does, so it is not counted.
 */
async function byteCounter(context, page) {
  const cdp = await context.newCDPSession(page);
  const requests = new Map();
  const waiters = [];
  let bytes = 0;
  cdp.on('Network.requestWillBeSent', (e) => requests.set(e.requestId, { url: e.request.url, type: e.type }));
  cdp.on('Network.responseReceived', (e) => {
    const r = requests.get(e.requestId);
    if (r) Object.assign(r, { status: e.response.status, encoding: e.response.headers['content-encoding'] ?? e.response.headers['Content-Encoding'] });
  });
  // The status as it came over the wire: Chromium reports a revalidated response (304) with
  // the cached response's status.
  cdp.on('Network.responseReceivedExtraInfo', (e) => {
    const r = requests.get(e.requestId);
    if (r) r.wireStatus = e.statusCode;
  });
  cdp.on('Network.loadingFinished', (e) => {
    bytes += e.encodedDataLength;
    const r = requests.get(e.requestId);
    if (r) r.bytes = e.encodedDataLength;
    for (const w of waiters) if (r && w.pattern.test(r.url)) w.ok(r);
  });
  await cdp.send('Network.enable');
  return {
    /** Resolves when a request whose URL matches `pattern` has finished loading. */
    finished(pattern) {
      const done = [...requests.values()].find((r) => r.bytes !== undefined && pattern.test(r.url));
      return done ? Promise.resolve(done) : new Promise((ok) => waiters.push({ pattern, ok }));
    },
    get bytes() {
      return bytes;
    },
    /** The bytes of the finished requests to the API (data, not the page's code). */
    get data() {
      return [...requests.values()]
        .filter((r) => r.bytes !== undefined && isApi(r.url))
        .reduce((n, r) => n + r.bytes, 0);
    },
    requests: () => [...requests.values()],
    reset() {
      bytes = 0;
      requests.clear();
    },
  };
}

test('pages carry the security headers and the browser enforces the CSP', async () => {
  const res = await fetch(BASE_URL, { headers: authHeaders() });
  const policy = res.headers.get('content-security-policy') ?? '';
  const html = await res.text();
  const nonce = html.match(/<script type="module" nonce="([^"]+)"/)?.[1];
  assert.ok(nonce, 'the hydration script carries a nonce');
  assert.match(policy, new RegExp(`script-src 'self' 'nonce-${nonce}' 'wasm-unsafe-eval'`));
  assert.match(policy, /frame-ancestors 'none'/);
  assert.doesNotMatch(policy, /unsafe-inline/);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(res.headers.get('referrer-policy'), 'same-origin');

  const { context, page, errors, csp } = await openPage(browser, 'phone');
  try {
    await page.goto(BASE_URL);
    await waitHydrated(page);
    assert.deepEqual(csp, [], 'the app itself runs within the policy');
    // An injected inline script (what an XSS would add) is refused and reported.
    const ran = await page.evaluate(async () => {
      const s = document.createElement('script');
      s.textContent = 'window.__injected = true;';
      const reported = new Promise((ok) => document.addEventListener('securitypolicyviolation', ok, { once: true }));
      document.head.append(s);
      await reported;
      return window.__injected === true;
    });
    assert.equal(ran, false, 'the injected script did not run');
    assert.equal(csp.length, 1, `one violation reported: ${csp.join('; ')}`);
    assert.match(csp[0], /^script-src/);
    csp.length = 0;
    assert.deepEqual(
      errors.filter((e) => !e.includes('Content Security Policy')),
      [],
    );
  } finally {
    await context.close();
  }
});

test('another page cannot frame Recourse', async () => {
  const { context, page, csp } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/healthz`);
    await page.evaluate((src) => {
      const frame = document.createElement('iframe');
      frame.src = src;
      document.body.append(frame);
      return new Promise((ok) => frame.addEventListener('load', ok, { once: true }));
    }, `${BASE_URL}/`);
    const framed = page.frames().find((f) => f !== page.mainFrame());
    // Chromium shows its own error page in the frame instead ("127.0.0.1 is blocked").
    assert.match(framed.url(), /^chrome-error:/, `the frame holds ${framed.url()}`);
    const text = await framed.evaluate(() => document.body?.innerText ?? '').catch(() => '');
    assert.doesNotMatch(text, /Routed agent work/, 'the framed page was not rendered');
    csp.length = 0;
  } finally {
    await context.close();
  }
});

for (const which of ['routes', 'profiles', 'profile', 'profile-edit', 'profile-new', 'route', 'access', 'audit', 'notifications']) {
  test(`a first visit to the ${which} page on a phone stays under 450 KB (or what it is held to) and a second under 20 KB`, async () => {
    const p = pages.find((x) => x.name === which);
    const { context, page, errors } = await openPage(browser, 'phone');
    try {
      const counter = await byteCounter(context, page);
      await page.goto(`${BASE_URL}${p.path}`);
      await page.getByRole('heading', { name: p.heading }).first().waitFor();
      await waitHydrated(page);
      await counter.finished(/\.wasm$/);
      // Every piece and file the page asked for, finished (one finished piece says nothing of
      // the others); the API's answers are not waited for (see FIRST_VISIT_BUDGET).
      const until = Date.now() + 10000;
      while (counter.requests().some((r) => !isApi(r.url) && r.bytes === undefined)) {
        assert.ok(Date.now() < until, `a file never finished loading: ${JSON.stringify(counter.requests())}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const data = counter.data;
      const first = counter.bytes - data;
      const wasm = counter.requests().filter((r) => r.url.endsWith('.wasm'));
      assert.ok(wasm.length >= 2, `the shell's WASM and the page's piece: ${JSON.stringify(wasm)}`);
      for (const w of wasm) assert.equal(w.encoding, 'br', `${w.url} arrives brotli-compressed`);
      if (first > FIRST_VISIT_BUDGET) console.log(`# OVER THE GOAL: first visit to ${which}: ${first} B (goal ${FIRST_VISIT_BUDGET} B)`);
      assert.ok(first <= firstVisitLimit(which), `first visit to ${p.path} transferred ${first} bytes`);

      const second = await context.newPage();
      const again = await byteCounter(context, second);
      await second.goto(`${BASE_URL}${p.path}`);
      await waitHydrated(second);
      assert.ok(again.bytes <= REPEAT_BUDGET, `second visit transferred ${again.bytes} bytes: ${JSON.stringify(again.requests())}`);
      assert.ok(
        !again.requests().some((r) => /\/pkg\//.test(r.url) && r.bytes > 0),
        `the script, WASM and stylesheet come from the cache: ${JSON.stringify(again.requests())}`,
      );
      console.log(`# ${which}: first visit ${first} B (WASM ${wasm.map((w) => w.bytes).join(' + ')} B; and ${data} B of data from the API by then), second visit ${again.bytes} B`);
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('every further page brings at most 60 KB of WASM (or what it is held to), and only when first opened', async () => {
  const { context, page, errors } = await openPage(browser, 'phone');
  try {
    const counter = await byteCounter(context, page);
    await page.goto(`${BASE_URL}/`);
    await waitHydrated(page);
    await counter.finished(/\.wasm$/);
    const menu = page.getByRole('button', { name: 'Menu' });
    /** Opens `name` from the header (the phone menu first), as a person would. */
    const viaHeader = async (label) => {
      await menu.click();
      await page.getByRole('link', { name: label, exact: true }).click();
    };
    const steps = [
      ['profiles', () => viaHeader('Profiles')],
      ['profile', () => page.getByTestId('profile-list').locator('a[href^="/profiles/"]').first().click()],
      ['profile-edit', () => page.getByRole('link', { name: 'Edit profile' }).click()],
      ['access', () => viaHeader('Access')],
      ['audit', () => viaHeader('Audit')],
      // The header's item names its unread count too ("Notifications, 2 unread").
      ['notifications', async () => {
        await menu.click();
        await page.getByTestId('notifications-link').click();
      }],
      ['routes', () => viaHeader('Routes')],
      ['route', () => page.locator('main a[href^="/routes/"]').first().click()],
    ];
    const brought = [];
    for (const [name, go] of steps) {
      const p = pages.find((x) => x.name === name);
      counter.reset();
      await go();
      await page.getByRole('heading', { name: p.heading }).first().waitFor();
      // A lazily loaded page's heading is rendered only once its piece ran; its last bytes
      // are reported a moment later.
      const until = Date.now() + 10000;
      while (counter.requests().some((r) => r.url.endsWith('.wasm') && r.bytes === undefined)) {
        assert.ok(Date.now() < until, `a piece never finished loading: ${JSON.stringify(counter.requests())}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const pieces = counter.requests().filter((r) => r.url.endsWith('.wasm'));
      const bytes = pieces.reduce((n, r) => n + (r.bytes ?? 0), 0);
      for (const w of pieces) assert.equal(w.encoding, 'br', `${w.url} arrives brotli-compressed`);
      console.log(`# further page ${name}: ${bytes} B of WASM in ${pieces.length} piece(s)`);
      if (bytes > FURTHER_PAGE_BUDGET) console.log(`# OVER THE GOAL: further page ${name}: ${bytes} B (goal ${FURTHER_PAGE_BUDGET} B)`);
      brought.push([name, bytes, pieces]);
    }
    // Every page measured before any is judged, so one run says them all.
    for (const [name, bytes, pieces] of brought) {
      assert.ok(bytes <= furtherPageLimit(name), `${name} brought ${bytes} bytes of WASM: ${JSON.stringify(pieces)}`);
    }
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a reload revalidates the page with a 304 and it hydrates again', async () => {
  const { context, page, errors } = await openPage(browser, 'phone');
  try {
    await page.goto(`${BASE_URL}/profiles`);
    await waitHydrated(page);
    const counter = await byteCounter(context, page);
    const response = await page.reload();
    await waitHydrated(page);
    const document = counter.requests().find((r) => r.type === 'Document');
    assert.equal(document?.wireStatus, 304, `the page was revalidated: ${JSON.stringify(document)}`);
    assert.ok(document.bytes < 1000, `only headers came over the network: ${document.bytes} bytes`);
    assert.equal(response.ok(), true);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
