// Shared browser set-up: Debian's Chromium driven by playwright-core, the viewports we
// promise to support, and helpers every test uses (hydration wait, screenshots, page errors).

import { chromium } from 'playwright-core';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const BASE_URL = process.env.RECOURSE_URL ?? 'http://127.0.0.1:3000';
export const ARTIFACTS = process.env.RECOURSE_ARTIFACTS ?? 'end2end/artifacts';

// How the tests authenticate (end2end/run.mjs): the administrator's API token for scripts, and
// its session cookie (`recourse_session=...`) for browser pages.
export const TOKEN = process.env.RECOURSE_TOKEN ?? '';
export const SESSION = process.env.RECOURSE_SESSION ?? '';

/** The headers a script sends to act as the administrator. */
export function authHeaders() {
  return TOKEN ? { authorization: `Bearer ${TOKEN}` } : {};
}

/** Puts a session cookie (`recourse_session=...`) into a browser context. */
export async function useSession(context, cookie) {
  const [name, value] = cookie.split(/=(.*)/s);
  await context.addCookies([{ name, value, url: BASE_URL, httpOnly: true, sameSite: 'Lax' }]);
}

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
  'small-phone': { width: 320, height: 640 },
};

// The machine's network is closed: without these flags Chromium keeps trying to reach
// Google's services. Playwright manages the profile directory itself.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ARGS });
}

/**
 * A page at the given viewport, signed in (the administrator's session unless `session` says
 * otherwise; `null` for nobody), that records uncaught errors, console errors and
 * Content-Security-Policy violations. The page runs under the server's CSP like any browser's;
 * closing the context throws if anything violated it, so a violation fails the test. A test
 * that provokes one on purpose empties `csp` before closing.
 */
export async function openPage(browser, viewportName, { session = SESSION } = {}) {
  const viewport = VIEWPORTS[viewportName];
  const context = await browser.newContext({ viewport, isMobile: viewportName !== 'desktop', hasTouch: viewportName !== 'desktop' });
  // Signed in as the administrator unless the test asks for another session (or none: null).
  if (session) await useSession(context, session);
  const csp = [];
  await context.exposeBinding('__recourseCspViolation', (_source, text) => csp.push(text));
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__recourseCspViolation(`${e.effectiveDirective} blocked ${e.blockedURI || 'inline code'} (${e.sourceFile || 'page'}:${e.lineNumber})`);
    });
  });
  const close = context.close.bind(context);
  context.close = async (...args) => {
    await close(...args);
    if (csp.length) throw new Error(`Content-Security-Policy violations: ${csp.join('; ')}`);
  };
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
  });
  return { context, page, errors, csp };
}

/** Resolves once the page is live: the shell and the page's own WASM piece have hydrated it
 * (`app::pages::PageLive`, an effect that only runs in the browser, once the page's code has run). */
export async function waitHydrated(page) {
  await page.locator('#app[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 15000 });
}

export async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Widest the document gets; must never exceed the viewport on a phone. */
export async function documentOverflow(page) {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

// ------------------------------------------------------------------------------------------------
// Helpers for the UI tests (issue 6).
// ------------------------------------------------------------------------------------------------

const AXE = new URL('../../node_modules/axe-core/axe.min.js', import.meta.url).pathname;

/**
 * Runs axe-core on the page; returns the serious and critical violations, summarized. axe is
 * evaluated through the driver, which the page's CSP does not govern (a script tag would be
 * refused, as it should be).
 */
export async function seriousA11yViolations(page) {
  await page.evaluate(readFileSync(AXE, 'utf8'));
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ')})`);
}

/** Visible interactive controls shorter than `min` px: `[{what, height}]`. */
export async function shortControls(page, min = 44) {
  return page.evaluate((min) => {
    const selector = 'a[href], button, summary, input:not([type=hidden]), select, textarea, [role=switch], [role=button], [tabindex]:not([tabindex="-1"])';
    const out = [];
    for (const el of document.querySelectorAll(selector)) {
      const r = el.getBoundingClientRect();
      const style = getComputedStyle(el);
      if (r.width === 0 || r.height === 0 || style.visibility === 'hidden') continue;
      if (el.closest('.sr-only')) continue;
      if (r.height < min) {
        const name = (el.getAttribute('aria-label') || el.textContent || el.id || el.tagName).trim().slice(0, 40);
        out.push({ what: `${el.tagName.toLowerCase()} "${name}"`, height: Math.round(r.height * 10) / 10 });
      }
    }
    return out;
  }, min);
}

/** Elements other than the document that scroll vertically (the page must be the one owner). */
export async function extraScrollOwners(page) {
  return page.evaluate(() => {
    const out = [];
    for (const el of document.querySelectorAll('body *')) {
      const style = getComputedStyle(el);
      if (!/(auto|scroll)/.test(style.overflowY)) continue;
      if (el.scrollHeight > el.clientHeight + 1 && el.getBoundingClientRect().height > 0) {
        out.push(`${el.tagName.toLowerCase()}#${el.id || '?'}`);
      }
    }
    return out;
  });
}

/**
 * JSON over the REST API of the server at `base` (the shared one by default) as the
 * administrator's token (or `token`; `null` for none): `{status, body}`.
 */
export async function api(path, { method = 'GET', body, base = BASE_URL, token = TOKEN } = {}) {
  const auth = token ? { authorization: `Bearer ${token}` } : {};
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? auth : { ...auth, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.status, body: json };
}

/** A unique suffix so tests sharing one database never collide. */
export function unique(prefix) {
  return `${prefix}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6).toString(36)}`;
}
