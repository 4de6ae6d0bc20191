// Measures what a phone downloads and waits for when it opens the routes page (issue 18): the
// bytes of a first visit (empty cache) and of a second visit (same browser, cache kept), and
// times from the start of navigation to the first paint, to the page's first handled interaction
// (a tap on the "How Recourse decides" disclosure that opens it) and to hydration (the WASM has
// taken over the page), on an unthrottled and on a throttled network (1.6 Mbit/s down,
// 750 kbit/s up, 150 ms latency). Then, on the throttled network, every page (issue 32): a
// first visit's bytes and time until the page is interactive (hydrated), and each further page
// opened from the header or a link: the WASM it brings and the time from the tap until its
// heading shows (a lazily loaded page renders only once its piece ran). A measurement, not a
// test: it prints numbers and asserts nothing.
//
// Usage: node end2end/measure.mjs [runs]   (after `cargo leptos build --release --precompress --split`)
// Env: RECOURSE_BIN (default target/release/recourse).

import { mkdirSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './lib/server.mjs';
import { launch, useSession, VIEWPORTS } from './lib/browser.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bin = resolve(root, process.env.RECOURSE_BIN ?? 'target/release/recourse');
const runs = Number(process.argv[2] ?? 5);
const artifacts = join(root, 'end2end', 'artifacts');
mkdirSync(artifacts, { recursive: true });

const PROFILES = {
  unthrottled: null,
  'throttled 1.6 Mbit/s, 150 ms': { offline: false, latency: 150, downloadThroughput: 1.6e6 / 8, uploadThroughput: 0.75e6 / 8 },
};

/** Opens a page with the network profile applied and its received bytes counted. */
async function instrumentedPage(context, conditions) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  const urls = new Map();
  const stats = { bytes: 0, wasmDone: null, byUrl: {} };
  let wasmDone;
  stats.wasmDone = new Promise((ok) => (wasmDone = ok));
  cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, e.request.url));
  cdp.on('Network.loadingFinished', (e) => {
    stats.bytes += e.encodedDataLength;
    const url = urls.get(e.requestId) ?? '?';
    const path = new URL(url).pathname;
    stats.byUrl[path] = (stats.byUrl[path] ?? 0) + e.encodedDataLength;
    if (path.endsWith('.wasm')) wasmDone();
  });
  cdp.on('Network.requestServedFromCache', (e) => {
    if ((urls.get(e.requestId) ?? '').endsWith('.wasm')) wasmDone();
  });
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
  if (conditions) await cdp.send('Network.emulateNetworkConditions', conditions);
  return { page, stats };
}

/**
 * Navigates and taps the disclosure until a tap opens it; times are ms from navigation start.
 * "Opens" is judged by what a person sees, the panel becoming visible, so the figure means the
 * same whether the browser handles the tap (a native `<details>`) or the WASM does.
 */
async function visit(page, stats, url) {
  await page.goto(url, { waitUntil: 'commit' });
  const toggle = page
    .locator('summary, button')
    .filter({ hasText: /How Recourse decides/ })
    .first();
  const panel = page.locator('#how-recourse-decides');
  for (;;) {
    await toggle.click({ timeout: 60000 });
    if (await panel.isVisible()) break;
  }
  // The WASM's last bytes are reported a moment after it runs; a cached one may not be at all.
  await Promise.race([stats.wasmDone, new Promise((ok) => setTimeout(ok, 3000))]);
  const times = await page.evaluate(() => ({
    hydrated: window.__hydratedAt ?? null,
    handled: window.__clicks?.at(-1) ?? null,
    dcl: performance.getEntriesByType('navigation')[0]?.domContentLoadedEventEnd ?? null,
    painted: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
  }));
  return { bytes: stats.bytes, ...times, byUrl: stats.byUrl };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const server = await startServer({ bin, cwd: root, logPath: join(artifacts, 'measure-server.log'), extraArgs: ['--demo'] });
const browser = await launch();
const results = {};
const THROTTLED = PROFILES['throttled 1.6 Mbit/s, 150 ms'];
/** Every page: path, and the heading that says it is there. Filled once the server is up. */
let pages = [];
const perPage = {};
const further = {};

/** A phone context signed in as the administrator (the audit log is theirs). */
async function phoneContext() {
  const context = await browser.newContext({ viewport: VIEWPORTS.phone, isMobile: true, hasTouch: true });
  await useSession(context, server.cookie);
  await context.addInitScript(() => {
    new MutationObserver(() => {
      if (!window.__hydratedAt && document.querySelector('#app[data-hydrated="true"]')) window.__hydratedAt = performance.now();
    }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
  });
  return context;
}

async function measurePages() {
  const get = async (path) => (await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.token}` } })).json();
  const profiles = await get('/api/v1/profiles');
  const routes = await get('/api/v1/routes');
  pages = [
    ['routes', '/', 'Routes'],
    ['profiles', '/profiles', 'Profiles'],
    // A profile as text; its editor and the new-profile form are one lazy route of their own.
    ['profile', `/profiles/${profiles[0].id}`, 'Candidates'],
    ['profile-edit', `/profiles/${profiles[0].id}/edit`, 'Try an error'],
    ['profile-new', '/profiles/new', 'New profile'],
    ['route', `/routes/${routes[0].id}`, 'Timeline'],
    ['access', '/access', 'New API token'],
    ['audit', '/audit', 'Audit log'],
  ];
  for (const [name, path, heading] of pages) {
    perPage[name] = [];
    for (let i = 0; i < runs; i++) {
      const context = await phoneContext();
      const { page, stats } = await instrumentedPage(context, THROTTLED);
      await page.goto(`${server.url}${path}`);
      await page.getByRole('heading', { name: heading }).first().waitFor({ timeout: 60000 });
      await page.locator('#app[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 60000 });
      await Promise.race([stats.wasmDone, new Promise((ok) => setTimeout(ok, 3000))]);
      const hydrated = await page.evaluate(() => window.__hydratedAt ?? null);
      perPage[name].push({ bytes: stats.bytes, hydrated, byUrl: { ...stats.byUrl } });
      await context.close();
    }
  }
  // Further pages, in one tab, opened as a person would from the routes page.
  const steps = [
    ['profiles', (page) => page.locator('#main-menu a[href="/profiles"]').click()],
    ['profile', (page) => page.getByTestId('profile-list').locator('a[href^="/profiles/"]').first().click()],
    ['profile-edit', (page) => page.getByRole('link', { name: 'Edit profile' }).click()],
    ['access', (page) => page.locator('#main-menu a[href="/access"]').click()],
    ['audit', (page) => page.locator('#main-menu a[href="/audit"]').click()],
    ['routes', (page) => page.locator('#main-menu a[href="/"]').click()],
    ['route', (page) => page.locator('main a[href^="/routes/"]').first().click()],
  ];
  for (let i = 0; i < runs; i++) {
    const context = await phoneContext();
    const { page, stats } = await instrumentedPage(context, THROTTLED);
    await page.goto(`${server.url}/`);
    await page.locator('#app[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 60000 });
    await Promise.race([stats.wasmDone, new Promise((ok) => setTimeout(ok, 3000))]);
    for (const [name, go] of steps) {
      const heading = pages.find((p) => p[0] === name)[2];
      const wasmBefore = Object.entries(stats.byUrl).filter(([u]) => u.endsWith('.wasm')).reduce((n, [, b]) => n + b, 0);
      const menu = page.getByRole('button', { name: 'Menu' });
      if (['profiles', 'access', 'audit', 'routes'].includes(name) && (await menu.isVisible())) await menu.click();
      const t0 = await page.evaluate(() => performance.now());
      await go(page);
      await page.getByRole('heading', { name: heading }).first().waitFor({ timeout: 60000 });
      const t1 = await page.evaluate(() => performance.now());
      await new Promise((ok) => setTimeout(ok, 300));
      const wasmAfter = Object.entries(stats.byUrl).filter(([u]) => u.endsWith('.wasm')).reduce((n, [, b]) => n + b, 0);
      (further[name] ??= []).push({ bytes: wasmAfter - wasmBefore, ms: t1 - t0 });
    }
    await context.close();
  }
}

try {
  for (const [name, conditions] of Object.entries(PROFILES)) {
    results[name] = [];
    for (let i = 0; i < runs; i++) {
      const context = await browser.newContext({ viewport: VIEWPORTS.phone, isMobile: true, hasTouch: true });
      await context.addInitScript(() => {
        document.addEventListener('click', () => (window.__clicks ??= []).push(performance.now()), true);
        new MutationObserver(() => {
          if (!window.__hydratedAt && document.querySelector('#app[data-hydrated="true"]')) window.__hydratedAt = performance.now();
        }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
      });
      const first = await instrumentedPage(context, conditions);
      const a = await visit(first.page, first.stats, server.url);
      const second = await instrumentedPage(context, conditions);
      const b = await visit(second.page, second.stats, server.url);
      results[name].push({ first: a, second: b });
      await context.close();
    }
  }
  await measurePages();
} finally {
  await browser.close();
  await server.close();
}

const kb = (b) => `${(b / 1000).toFixed(1)} KB`;
const ms = (t) => (t === null ? '?' : `${Math.round(t)} ms`);
console.log(`routes page, phone viewport (${VIEWPORTS.phone.width}x${VIEWPORTS.phone.height}), headless Chromium, ${runs} runs each, medians:`);
console.log('| network | first visit | first paint | first handled tap | hydrated | second visit | second visit tap |');
console.log('|---|---|---|---|---|---|---|');
for (const [name, rs] of Object.entries(results)) {
  const m = (f) => median(rs.map(f));
  console.log(
    `| ${name} | ${kb(m((r) => r.first.bytes))} | ${ms(m((r) => r.first.painted))} | ${ms(m((r) => r.first.handled))} | ${ms(m((r) => r.first.hydrated))} | ${kb(m((r) => r.second.bytes))} | ${ms(m((r) => r.second.handled))} |`,
  );
}
const sample = results.unthrottled?.[0];
if (sample) {
  console.log('\nfirst visit, bytes by path (unthrottled, run 1):');
  for (const [path, bytes] of Object.entries(sample.first.byUrl)) console.log(`  ${path}: ${bytes}`);
  console.log('second visit, bytes by path (unthrottled, run 1):');
  for (const [path, bytes] of Object.entries(sample.second.byUrl)) console.log(`  ${path}: ${bytes}`);
}

console.log(`\nevery page on the throttled network (1.6 Mbit/s, 150 ms), phone, ${runs} runs, medians:`);
console.log('| page | first visit | hydrated (interactive) | opened from another page: WASM | tap to page shown |');
console.log('|---|---|---|---|---|');
for (const [name] of pages) {
  const first = perPage[name] ?? [];
  const next = further[name] ?? [];
  const m = (xs, f) => (xs.length ? median(xs.map(f)) : null);
  console.log(
    `| ${name} | ${kb(m(first, (r) => r.bytes) ?? 0)} | ${ms(m(first, (r) => r.hydrated))} | ${kb(m(next, (r) => r.bytes) ?? 0)} | ${ms(m(next, (r) => r.ms))} |`,
  );
}
const sampleRoute = perPage.routes?.[0];
if (sampleRoute) {
  console.log('\nfirst visit to the routes page, bytes by path (throttled, run 1):');
  for (const [path, bytes] of Object.entries(sampleRoute.byUrl)) console.log(`  ${path}: ${bytes}`);
}
