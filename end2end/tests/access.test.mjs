// The Access page in a real browser, on both phones and a desktop: a person makes an API token,
// sees its secret once, copies it with the Copy button (the clipboard holds it), and the token
// works for a script (and stops working once revoked from the page, after a confirmation); an
// administrator makes an account, changes its role, resets its password (the old one stops
// working, the new one signs in), and is refused (with the server's reason, on the row) when
// disabling the last administrator; someone who is not an administrator is not offered
// accounts at all. Every state is checked for overflow, 44 px targets and axe findings.

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
  unique,
  api,
  BASE_URL,
  VIEWPORTS,
} from '../lib/browser.mjs';
import { ADMIN } from '../lib/server.mjs';

const PASSWORD = 'a long enough passphrase';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** Who a bearer token is, or the status that refused it. */
async function whoIs(secret) {
  const res = await fetch(`${BASE_URL}/api/v1/session`, { headers: { authorization: `Bearer ${secret}` } });
  return res.status === 200 ? (await res.json()).name : res.status;
}

/** Signs `name` in through the API; the session cookie for `openPage` (or the refusal's status). */
async function sessionOf(name, password = PASSWORD) {
  const res = await fetch(`${BASE_URL}/api/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, password }),
  });
  if (res.status !== 204) return res.status;
  return res.headers.get('set-cookie').split(';')[0];
}

/** The page as a person meets it: no overflow on a phone, 44 px targets, no serious axe finding. */
async function checkPage(page, viewport, what) {
  assert.deepEqual(await seriousA11yViolations(page), [], `axe: ${what} (${viewport})`);
  assert.deepEqual(await shortControls(page), [], `44 px: ${what} (${viewport})`);
  if (viewport !== 'desktop') assert.ok((await documentOverflow(page)) <= 0, `overflow: ${what} (${viewport})`);
}

for (const viewport of Object.keys(VIEWPORTS)) {
  test(`a token is made, shown once, copied, used and revoked from the Access page (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: BASE_URL });
      await page.goto(`${BASE_URL}/access`);
      await waitHydrated(page);
      await page.getByRole('heading', { name: 'Access', level: 1 }).waitFor();
      const name = unique('script').toLowerCase();
      await page.getByLabel('What it is for').fill(name);
      // Nothing chosen: the page says so at the field, and nothing is made.
      await page.getByRole('button', { name: 'Make token' }).click();
      await page.locator('#token-permissions-error', { hasText: 'Give at least one permission.' }).waitFor();
      // A permission is a switch (a button whose text names it), not a labelled checkbox.
      const permission = page.getByRole('switch', { name: 'view_routes' });
      await permission.click();
      assert.equal(await permission.getAttribute('aria-checked'), 'true');
      await page.getByRole('button', { name: 'Make token' }).click();
      const shown = page.getByTestId('token-secret');
      await shown.waitFor();
      const secret = await page.getByLabel('The new token').inputValue();
      assert.match(secret, /^rct_/);
      assert.equal(await whoIs(secret), ADMIN.name, 'the token acts for the signed-in account');
      await page.getByTestId('token-list').locator(`[data-token="${name}"]`).waitFor();
      await checkPage(page, viewport, 'the new token shown');
      await screenshot(page, `access-token-${viewport}`);
      // The Copy button puts exactly the secret on the clipboard, and says so.
      await shown.getByRole('button', { name: 'Copy' }).click();
      await shown.getByText('Copied to the clipboard.').waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
      await page.getByRole('button', { name: 'I have copied it' }).click();
      await shown.waitFor({ state: 'detached' });
      assert.ok(!(await page.content()).includes(secret), 'the secret is gone from the page');

      // Revoking asks first; then the token's next request is refused.
      const row = page.getByTestId('token-list').locator(`[data-token="${name}"]`);
      await row.getByRole('button', { name: 'Revoke' }).click();
      await row.getByRole('button', { name: 'Keep' }).click();
      assert.equal(await whoIs(secret), ADMIN.name, 'kept');
      await row.getByRole('button', { name: 'Revoke' }).click();
      await row.getByRole('button', { name: 'Revoke it' }).click();
      await page.getByTestId('token-list').locator(`[data-token="${name}"]`, { hasText: 'revoked' }).waitFor();
      assert.equal(await whoIs(secret), 401);
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('an administrator makes an account, changes its role, and cannot disable the last administrator', async () => {
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/access`);
    await waitHydrated(page);
    await page.getByRole('heading', { name: 'Accounts', level: 2 }).waitFor();
    const name = unique('op').toLowerCase();
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('Role', { exact: true }).selectOption('operator');
    await page.getByLabel('First password').fill('short');
    await page.getByRole('button', { name: 'Make account' }).click();
    await page.locator('#account-password-error', { hasText: '12' }).waitFor();
    await page.getByLabel('First password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Make account' }).click();
    // Seen once in a full run (not reproduced in eight runs since): the confirmation never came.
    // Say what the page showed instead, so the next time tells why.
    await page
      .getByText(`Made the account ${name} (operator).`)
      .waitFor()
      .catch(async (e) => {
        const alerts = await page.getByRole('alert').allInnerTexts();
        throw new Error(`${e.message}\nthe page's alerts: ${JSON.stringify(alerts.filter((a) => a.trim()))}`);
      });
    const row = page.getByTestId('account-list').locator(`[data-account="${name}"]`);
    await row.waitFor();
    await row.getByLabel(`Role of ${name}`).selectOption('viewer');
    // The server has it: the account signs in as a viewer.
    for (let i = 0; i < 100; i += 1) {
      const list = await api('/api/v1/accounts');
      if (list.body.find((a) => a.name === name)?.role === 'viewer') break;
      assert.ok(i < 99, 'the role change reached the server');
      await page.waitForTimeout(50);
    }
    const cookie = await sessionOf(name);
    assert.match(cookie, /^recourse_session=./);

    // A new password, set on the row: the old one is refused, the new one signs in.
    const fresh = 'another long passphrase';
    await row.getByText(`Reset the password of ${name}`).click();
    await row.getByLabel('New password (their sessions end)').fill('short');
    await row.getByRole('button', { name: 'Set password' }).click();
    await row.locator(`#password-${(await api('/api/v1/accounts')).body.find((a) => a.name === name).id}-error`, { hasText: '12' }).waitFor();
    await row.getByLabel('New password (their sessions end)').fill(fresh);
    await row.getByRole('button', { name: 'Set password' }).click();
    await row.getByText('Password changed; their sessions ended.').waitFor();
    assert.equal(await sessionOf(name), 401, 'the old password no longer signs in');
    const renewed = await sessionOf(name, fresh);
    assert.match(renewed, /^recourse_session=./);
    await checkPage(page, 'desktop', 'accounts');

    // The administrator is alone: disabling them is refused, and the row says why.
    const accounts = await api('/api/v1/accounts');
    const admins = accounts.body.filter((a) => a.role === 'admin' && !a.disabled);
    if (admins.length === 1) {
      const me = page.getByTestId('account-list').locator(`[data-account="${admins[0].name}"]`);
      await me.getByRole('button', { name: 'Disable' }).click();
      await me.getByRole('alert').filter({ hasText: 'no enabled administrator' }).waitFor();
      assert.equal((await me.getByTestId('account-state').textContent()).trim(), 'enabled');
    }
    // The refusal is the server's 409, which Chromium logs as a failed load: that one only.
    assert.deepEqual(errors.filter((e) => !/status of 409 \(Conflict\)/.test(e)), []);
    if (admins.length !== 1) assert.deepEqual(errors, []);

    // A viewer opens the page: tokens, but no accounts, and a note saying whose they are.
    const viewer = await openPage(browser, 'small-phone', { session: renewed });
    try {
      await viewer.page.goto(`${BASE_URL}/access`);
      await waitHydrated(viewer.page);
      await viewer.page.getByRole('heading', { name: 'New API token' }).waitFor();
      await viewer.page.getByText('Accounts and roles are managed by administrators.').waitFor();
      assert.equal(await viewer.page.getByRole('heading', { name: 'Accounts' }).count(), 0);
      assert.equal(await viewer.page.getByLabel('admin').count(), 0, 'only permissions the viewer holds are offered');
      await checkPage(viewer.page, 'small-phone', 'a viewer');
      assert.deepEqual(viewer.errors, []);
    } finally {
      await viewer.context.close();
    }
  } finally {
    await context.close();
  }
});
