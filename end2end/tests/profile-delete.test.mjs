// Deleting a profile from the list: a confirmation a keyboard user can answer (focus moves to
// the harmless answer, Escape backs out), the list updating afterwards, and the server's
// refusal (a profile that routes used is kept) shown on the row. The confirmation passes axe
// and the phone layout rules at every viewport.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch,
  openPage,
  waitHydrated,
  screenshot,
  documentOverflow,
  shortControls,
  seriousA11yViolations,
  api,
  unique,
  BASE_URL,
  VIEWPORTS,
} from '../lib/browser.mjs';
import { routeInRetryWait } from '../lib/fixtures.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

async function createProfile(name) {
  const res = await api('/api/v1/profiles', {
    method: 'POST',
    body: { name, policy: { version: 1, candidates: [{ id: 'only', transient: OFF, hard: OFF }] } },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

const OFF = {
  retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
  wait_for_reset: { enabled: false, max_wait_seconds: 0 },
  on_exhausted: 'skip',
};

const focusedText = (page) => page.evaluate(() => document.activeElement?.textContent?.trim() ?? '');

test('a profile is deleted with a keyboard-operable confirmation and leaves the list', async () => {
  const name = unique('Delete me');
  const profile = await createProfile(name);
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/profiles`);
    await waitHydrated(page);
    const row = page.locator(`li[data-profile-id="${profile.id}"]`);
    const del = row.getByRole('button', { name: `Delete profile ${name}` });

    // Enter asks; focus lands on "Keep it"; Escape backs out and returns focus to Delete.
    await del.focus();
    await page.keyboard.press('Enter');
    const question = row.getByRole('group', { name: `Delete profile ${name}? This cannot be undone.` });
    await question.waitFor({ state: 'visible' });
    await page.waitForFunction(() => document.activeElement?.textContent?.trim() === 'Keep it');
    await page.keyboard.press('Escape');
    await question.waitFor({ state: 'hidden' });
    await page.waitForFunction((id) => document.activeElement?.id === `delete-${id}`, profile.id);

    // Ask again, and answer "Yes" from the keyboard alone.
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.activeElement?.textContent?.trim() === 'Keep it');
    await page.keyboard.press('Shift+Tab');
    assert.equal(await focusedText(page), 'Yes, delete it');
    await page.keyboard.press('Enter');

    await page.getByTestId('profiles-status').getByText(`Deleted profile ${name}.`).waitFor();
    await row.waitFor({ state: 'detached' });
    assert.equal((await api(`/api/v1/profiles/${profile.id}`)).status, 404);
    await page.waitForFunction(() => document.activeElement?.id === 'profiles-status');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a profile that routes used is kept, and the server says why on its row', async () => {
  const { id: routeId } = await routeInRetryWait(unique('kept'));
  const route = await api(`/api/v1/routes/${routeId}`);
  const profileId = route.body.route.profile_id;
  const name = route.body.route.profile_name;
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/profiles`);
    await waitHydrated(page);
    const row = page.locator(`li[data-profile-id="${profileId}"]`);
    await row.getByRole('button', { name: `Delete profile ${name}` }).click();
    await row.getByRole('button', { name: 'Yes, delete it' }).click();
    await row.getByRole('alert').getByText(/^Not deleted: the profile has 1 routes?; it is kept/).waitFor();
    // Still listed, still stored, and the Delete button is back with the reason attached.
    const del = row.getByRole('button', { name: `Delete profile ${name}` });
    await del.waitFor({ state: 'visible' });
    assert.equal((await api(`/api/v1/profiles/${profileId}`)).status, 200);
    assert.match(await del.getAttribute('aria-describedby'), /-error$/);
    await screenshot(page, 'profile-delete-refused-desktop');
    // The refusal is an HTTP error response, which Chromium logs; nothing else may appear.
    assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  } finally {
    await context.close();
  }
});

for (const viewport of Object.keys(VIEWPORTS)) {
  test(`the delete confirmation passes axe and fits (${viewport})`, async () => {
    const name = unique(`Confirm ${viewport}`);
    const profile = await createProfile(name);
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      await page.goto(`${BASE_URL}/profiles`);
      await waitHydrated(page);
      const row = page.locator(`li[data-profile-id="${profile.id}"]`);
      await row.getByRole('button', { name: `Delete profile ${name}` }).click();
      await row.getByRole('button', { name: 'Keep it' }).waitFor({ state: 'visible' });
      assert.deepEqual(await seriousA11yViolations(page), []);
      assert.deepEqual(await shortControls(page), []);
      if (viewport !== 'desktop') assert.ok((await documentOverflow(page)) <= 0, 'no horizontal overflow');
      await row.screenshot({ path: `${process.env.RECOURSE_ARTIFACTS ?? 'end2end/artifacts'}/profile-delete-confirm-${viewport}.png` });
      await row.getByRole('button', { name: 'Keep it' }).click();
      await row.getByRole('button', { name: `Delete profile ${name}` }).waitFor({ state: 'visible' });
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}
