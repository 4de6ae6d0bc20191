// "Try an error" in the profile editor (issue 32, item 5): an error pasted or picked from the
// catalogue's fixtures is read by the server's classifier and played against the form's
// unsaved policy, with nothing saved. Checked on both phones and a desktop (overflow, 44 px,
// axe; CSP through openPage). That the panel's classification equals `recourse classify`'s
// for every fixture is server/tests/it/try_evidence.rs (the same server function, every fixture).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
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

const OVERLOADED = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}';

let browser;
let profileId;
before(async () => {
  browser = await launch();
  const profile = await api('/api/v1/profiles', {
    method: 'POST',
    body: {
      name: unique('Try'),
      policy: {
        version: 1,
        candidates: ['main', 'backup'].map((id) => ({
          id,
          transient: {
            retry: { enabled: true, max_retries: 2, initial_interval_seconds: 5 },
            wait_for_reset: { enabled: false, max_wait_seconds: 0 },
            on_exhausted: 'skip',
          },
          hard: {
            retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
            wait_for_reset: { enabled: false, max_wait_seconds: 0 },
            on_exhausted: 'stop',
          },
        })),
      },
    },
  });
  assert.equal(profile.status, 201, JSON.stringify(profile.body));
  profileId = profile.body.id;
});
after(async () => {
  await browser?.close();
});

for (const viewport of Object.keys(VIEWPORTS)) {
  test(`a pasted overload is read and played against the unsaved policy (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      await page.goto(`${BASE_URL}/profiles/${profileId}/edit`);
      await waitHydrated(page);
      const panel = page.getByTestId('try-error');
      await panel.getByLabel('What it is').selectOption('http');
      await panel.getByLabel('HTTP status').fill('529');
      await panel.getByLabel('The error').fill(OVERLOADED);
      await panel.getByRole('button', { name: 'Try it' }).click();
      await panel.getByTestId('trial-code').getByText('provider_overloaded').waitFor();
      assert.match(await panel.getByTestId('trial-class').textContent(), /Transient/);
      assert.match(await panel.getByTestId('trial-gate-before').textContent(), /may follow the policy/);
      assert.match(await panel.getByTestId('trial-gate-after').textContent(), /already answered/);
      const steps = panel.getByTestId('trial-steps').locator('li');
      assert.deepEqual(
        await steps.evaluateAll((els) => els.map((e) => e.dataset.step)),
        ['retry', 'retry', 'switch', 'retry', 'retry', 'switch', 'none-left'],
      );
      assert.match(await steps.nth(0).textContent(), /retry 1 of 2 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);

      // The unsaved form is what is played: main's transient policy now stops at once.
      await page.getByRole('button', { name: /Edit policies for main/ }).click();
      const transient = page.getByRole('region', { name: 'Transient errors' }).first();
      await transient.getByRole('switch', { name: /Retry the same candidate/ }).click();
      await transient.getByLabel('When recovery is used up').selectOption('stop');
      await steps.first().waitFor();
      assert.deepEqual(await steps.evaluateAll((els) => els.map((e) => e.dataset.step)), ['stop']);

      assert.deepEqual(await seriousA11yViolations(page), [], `axe (${viewport})`);
      assert.deepEqual(await shortControls(page), [], `44 px (${viewport})`);
      if (viewport !== 'desktop') assert.ok((await documentOverflow(page)) <= 0, `overflow (${viewport})`);
      await screenshot(page, `try-error-${viewport}`);

      // Nothing was saved: the stored profile still retries.
      const stored = await api(`/api/v1/profiles/${profileId}`);
      assert.equal(stored.body.policy.candidates[0].transient.retry.enabled, true);
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('a catalogue fixture is picked, shown and read like any pasted envelope', async () => {
  const { context, page, errors } = await openPage(browser, 'phone');
  try {
    await page.goto(`${BASE_URL}/profiles/${profileId}/edit`);
    await waitHydrated(page);
    const panel = page.getByTestId('try-error');
    await panel.getByRole('button', { name: 'Pick a catalogue fixture' }).click();
    const picker = panel.getByLabel('Catalogue fixture');
    await picker.waitFor();
    const names = await picker.locator('option').evaluateAll((os) => os.map((o) => o.value).filter(Boolean));
    assert.ok(names.length > 100, `${names.length} fixtures offered`);
    const name = names.find((n) => n.startsWith('anthropic-api/')) ?? names[0];
    await picker.selectOption(name);
    await page.waitForFunction(() => document.querySelector('#try-text').value.includes('"items"'));
    assert.equal(await panel.getByLabel('What it is').inputValue(), 'envelope');
    const answered = page.waitForResponse((r) => r.url().includes('/api/ui/try_evidence'));
    await panel.getByRole('button', { name: 'Try it' }).click();
    const trial = await (await answered).json();
    await panel.getByTestId('trial-rule').waitFor();
    // `recourse classify`, as of the instant the server read it, says what the panel shows.
    const envelope = await page.locator('#try-text').inputValue();
    const [cli] = execFileSync(process.env.RECOURSE_BIN, ['classify', '--now', trial.classified_at, '-'], { input: envelope })
      .toString()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(trial.classification.code, cli.code);
    assert.equal(trial.classification.classifier_rule, cli.classifier_rule);
    assert.ok((await panel.getByTestId('trial-code').textContent()).includes(cli.code));
    assert.ok((await panel.getByTestId('trial-rule').textContent()).includes(cli.classifier_rule ?? 'none matched'));
    assert.ok((await documentOverflow(page)) <= 0, 'no overflow with a fixture shown');
    assert.deepEqual(await shortControls(page), []);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
