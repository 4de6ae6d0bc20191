// Shared browser set-up: Debian's Chromium driven by playwright-core, the viewports we
// promise to support, and helpers every test uses (hydration wait, screenshots, page errors).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const BASE_URL = process.env.RECOURSE_URL ?? 'http://127.0.0.1:3000';
export const ARTIFACTS = process.env.RECOURSE_ARTIFACTS ?? 'end2end/artifacts';

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

/** A page at the given viewport that records uncaught errors and console errors. */
export async function openPage(browser, viewportName) {
  const viewport = VIEWPORTS[viewportName];
  const context = await browser.newContext({ viewport, isMobile: viewportName !== 'desktop', hasTouch: viewportName !== 'desktop' });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
  });
  return { context, page, errors };
}

/** Resolves once the WASM has hydrated the page (an effect that only runs in the browser). */
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
