// Spec scenario 9: on a phone, a person edits both class policies of a candidate and every
// control stays usable in one column, at least 44 px tall, with the page as the only scroll
// owner and no horizontal overflow, from 320 px wide up.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch,
  openPage,
  waitHydrated,
  screenshot,
  documentOverflow,
  shortControls,
  extraScrollOwners,
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

async function assertPhoneLayout(page, when) {
  assert.ok((await documentOverflow(page)) <= 0, `no horizontal overflow ${when}`);
  assert.deepEqual(await shortControls(page), [], `every control is at least 44 px tall ${when}`);
  assert.deepEqual(await extraScrollOwners(page), [], `the page is the only scroll owner ${when}`);
}

for (const viewport of ['phone', 'small-phone']) {
  test(`scenario 9: editing both class policies on a phone stays in one usable column (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      await page.goto(`${BASE_URL}/profiles`);
      await waitHydrated(page);
      await assertPhoneLayout(page, 'on the profile list');
      await page.getByRole('link', { name: 'New profile' }).click();
      await page.getByRole('heading', { name: 'New profile', level: 1 }).waitFor();
      await assertPhoneLayout(page, 'on the new-profile form');
      const first = unique('phone');
      await page.getByLabel('Name', { exact: true }).fill(unique('Phone'));
      await page.getByLabel('First candidate id').fill(first);
      await page.getByRole('button', { name: 'Create profile' }).click();
      await page.getByRole('button', { name: /Edit policies for/ }).waitFor();
      await waitHydrated(page);
      await page.getByLabel('Add a candidate (its id)').fill('a-very-long-candidate-id-that-must-wrap-on-a-small-phone');
      await page.getByRole('button', { name: 'Add candidate' }).click();
      await page.getByRole('button', { name: new RegExp(`Edit policies for ${first}`) }).click();

      const transient = page.getByRole('region', { name: 'Transient errors' }).first();
      const hard = page.getByRole('region', { name: 'Hard errors' }).first();
      // Every section switched fully on, so every control is on screen.
      for (const section of [transient, hard]) {
        await section.getByRole('switch', { name: /Retry the same candidate/ }).click();
        await section.getByRole('switch', { name: /Wait for a trusted reset time/ }).click();
      }
      await transient.getByLabel('Maximum retries').fill('6');
      await hard.getByLabel('Maximum wait', { exact: true }).fill('999999999');
      await hard.getByText(/Maximum wait must be between/).waitFor({ state: 'visible' });

      // One column: the Hard section sits below the Transient one, at the same left edge.
      const t = await transient.boundingBox();
      const h = await hard.boundingBox();
      assert.ok(h.y >= t.y + t.height, 'sections are stacked, not side by side');
      assert.ok(Math.abs(h.x - t.x) < 1, 'sections share the left edge');
      const width = page.viewportSize().width;
      assert.ok(t.x >= 0 && t.x + t.width <= width, 'the section fits the viewport');

      await assertPhoneLayout(page, 'with both policies open and an error shown');
      await screenshot(page, `scenario9-${viewport}`);

      // The menu on a phone, too.
      await page.getByRole('button', { name: 'Menu' }).click();
      await assertPhoneLayout(page, 'with the menu open');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}
