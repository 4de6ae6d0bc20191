// Measures what a phone downloads and waits for when it opens the routes page (issue 18): the
// bytes of a first visit (empty cache) and of a second visit (same browser, cache kept), and
// times from the start of navigation to the first paint, to the page's first handled interaction
// (a tap on the "How Recourse decides" disclosure that opens it) and to hydration (the WASM has
// taken over the page), on an unthrottled and on a throttled network (1.6 Mbit/s down,
// 750 kbit/s up, 150 ms latency). A measurement, not a test: it prints numbers and asserts
// nothing.
//
// Usage: node end2end/measure.mjs [runs]   (after `cargo leptos build --release --precompress`)
// Env: RECOURSE_BIN (default target/release/recourse).

import { mkdirSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './lib/server.mjs';
import { launch, VIEWPORTS } from './lib/browser.mjs';

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
