// Editing a profile's policies in a real browser, at the three viewports we support: both class
// policies change, the schedule preview follows, an out-of-range value gets the server's
// message inline, and what is saved comes back normalized after a reload.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch,
  openPage,
  waitHydrated,
  screenshot,
  documentOverflow,
  unique,
  api,
  BASE_URL,
} from '../lib/browser.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** Creates a profile through the "New profile" form and lands on its editor. */
async function createProfile(page, name, firstId) {
  await page.goto(`${BASE_URL}/profiles`);
  await waitHydrated(page);
  // The form is a page of its own, one link from the list.
  await page.getByRole('link', { name: 'New profile' }).click();
  await page.waitForURL((u) => u.pathname === '/profiles/new');
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('First candidate id').fill(firstId);
  await page.getByRole('button', { name: 'Create profile' }).click();
  await page.getByRole('heading', { name, level: 1 }).waitFor();
  await waitHydrated(page);
  // The new profile's editor opens: adding candidates and setting policies is what comes next.
  assert.match(new URL(page.url()).pathname, /^\/profiles\/[^/]+\/edit$/);
}

async function text(locator) {
  return (await locator.textContent()).trim();
}

for (const viewport of ['desktop', 'phone', 'small-phone']) {
  test(`both class policies are edited, previewed, validated, saved and reloaded normalized (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      const name = unique(`Edit ${viewport}`);
      const first = unique('main');
      await createProfile(page, name, first);

      const toggle = page.getByRole('button', { name: new RegExp(`(Edit|Hide) policies for ${first}`) });
      assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
      await toggle.click();
      assert.equal(await toggle.getAttribute('aria-expanded'), 'true');

      const transient = page.getByRole('region', { name: 'Transient errors' });
      const hard = page.getByRole('region', { name: 'Hard errors' });
      // The class is explained in visible words with concrete examples.
      await transient.getByText('The provider is overloaded').waitFor({ state: 'visible' });
      await hard.getByText("Your plan's usage limit or credits are used up").waitFor({ state: 'visible' });

      // Transient: retry on, preview shows the doubling schedule.
      const tPreview = transient.getByTestId('schedule-preview');
      assert.equal(await text(tPreview), 'Otherwise: no retries: skip to the next candidate immediately.');
      await transient.getByRole('switch', { name: /Retry the same candidate/ }).click();
      assert.equal(
        await text(tPreview),
        'Otherwise: retries after 5 s, 10 s and 20 s (35 s in all), then skip to the next candidate.',
      );
      const maxRetries = transient.getByLabel('Maximum retries');
      await maxRetries.fill('4');
      assert.equal(
        await text(tPreview),
        'Otherwise: retries after 5 s, 10 s, 20 s and 40 s (1 min 15 s in all), then skip to the next candidate.',
      );
      // Out of range: the server's message, inline, on the field.
      await maxRetries.fill('11');
      await transient.getByText('Maximum retries must be between 1 and 10.').waitFor({ state: 'visible' });
      assert.equal(await maxRetries.getAttribute('aria-invalid'), 'true');
      assert.equal(await text(tPreview), 'Fix the marked values to see the schedule.');
      await maxRetries.fill('4');
      assert.equal(await maxRetries.getAttribute('aria-invalid'), 'false');
      // 2 minutes, typed with a unit.
      await transient.getByLabel('Initial interval', { exact: true }).fill('2');
      await transient.getByLabel('Initial interval: unit').selectOption('minutes');
      assert.equal(
        await text(tPreview),
        'Otherwise: retries after 2 min, 4 min, 8 min and 16 min (30 min in all), then skip to the next candidate.',
      );

      // Hard: reset waiting up to 2 days, then stop.
      const hPreview = hard.getByTestId('schedule-preview');
      await hard.getByRole('switch', { name: /Wait for a trusted reset time/ }).click();
      const maxWait = hard.getByLabel('Maximum wait', { exact: true });
      assert.equal(await maxWait.inputValue(), '5');
      await hard.getByLabel('Maximum wait: unit').selectOption('days');
      await maxWait.fill('8');
      await hard
        .getByText('Maximum wait must be between 1 s and 7 days (604800 seconds).')
        .waitFor({ state: 'visible' });
      await maxWait.fill('2');
      await hard.getByLabel('When recovery is used up').selectOption('stop');
      assert.equal(
        await text(hPreview),
        'On a trusted reset time: waits once for a trusted reset time up to 2 days away, then tries again. ' +
          'Otherwise: no retries, then stop for manual recovery.',
      );
      assert.ok((await documentOverflow(page)) <= 0, 'no horizontal overflow while editing');
      await screenshot(page, `profile-editing-${viewport}`);

      // Save: the normalized document comes back and is shown.
      await page.getByRole('button', { name: 'Save profile' }).click();
      const saved = page.getByTestId('saved-document');
      await saved.getByText(/Saved revision \d+\./).waitFor();
      await saved.getByRole('button', { name: 'Show the stored JSON' }).click();
      const json = JSON.parse(await page.locator('#saved-json').textContent());
      assert.deepEqual(json.candidates[0], {
        id: first,
        transient: {
          retry: { enabled: true, max_retries: 4, initial_interval_seconds: 120 },
          wait_for_reset: { enabled: false, max_wait_seconds: 0 },
          on_exhausted: 'skip',
        },
        hard: {
          retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
          wait_for_reset: { enabled: true, max_wait_seconds: 172800 },
          on_exhausted: 'stop',
        },
      });
      await screenshot(page, `profile-saved-${viewport}`);

      // Reload: the stored values, in the largest whole unit.
      await page.reload();
      await waitHydrated(page);
      await page.getByRole('button', { name: new RegExp(`Edit policies for ${first}`) }).click();
      assert.equal(await transient.getByLabel('Maximum retries').inputValue(), '4');
      assert.equal(await transient.getByLabel('Initial interval', { exact: true }).inputValue(), '2');
      assert.equal(await transient.getByLabel('Initial interval: unit').inputValue(), 'minutes');
      assert.equal(await hard.getByLabel('Maximum wait', { exact: true }).inputValue(), '2');
      assert.equal(await hard.getByLabel('Maximum wait: unit').inputValue(), 'days');
      assert.equal(await hard.getByLabel('When recovery is used up').inputValue(), 'stop');
      assert.equal(
        await text(transient.getByTestId('schedule-preview')),
        'Otherwise: retries after 2 min, 4 min, 8 min and 16 min (30 min in all), then skip to the next candidate.',
      );
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('candidates are added, reordered by buttons and by keyboard, and a server error lands on its field', async () => {
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    const first = unique('alpha');
    await createProfile(page, unique('Order'), first);

    const newId = page.getByLabel('Add a candidate (its id)');
    await newId.fill('beta');
    await page.getByRole('button', { name: 'Add candidate' }).click();
    await newId.fill('gamma');
    await newId.press('Enter');
    const ids = () =>
      page.locator('input[id^="cand-"][id$="-id"]').evaluateAll((els) => els.map((e) => e.value));
    assert.deepEqual(await ids(), [first, 'beta', 'gamma']);

    // By button: gamma moves up, and focus stays on its button.
    await page.getByRole('button', { name: 'Move up gamma' }).click();
    assert.deepEqual(await ids(), [first, 'gamma', 'beta']);
    await page.waitForFunction(() => document.activeElement?.textContent?.includes('Move up'));
    // By keyboard: Alt+ArrowUp on a row's field moves it up again.
    await page.getByLabel('Candidate 2 id').press('Alt+ArrowUp');
    assert.deepEqual(await ids(), ['gamma', first, 'beta']);
    await page.getByLabel('Candidate 1 id').press('Alt+ArrowDown');
    assert.deepEqual(await ids(), [first, 'gamma', 'beta']);

    // Removing and an empty id.
    await page.getByRole('button', { name: 'Remove beta' }).click();
    assert.deepEqual(await ids(), [first, 'gamma']);
    await page.getByLabel('Candidate 2 id').fill('');
    await page.getByText('Candidate id cannot be empty.').waitFor({ state: 'visible' });

    // A duplicate id is the server's to find (a cross-field check); its answer lands on the field.
    await page.getByLabel('Candidate 2 id').fill(first);
    await page.getByRole('button', { name: 'Save profile' }).click();
    const duplicate = new RegExp(`^Candidate id .${first}. is already used by candidates\\[0\\]\\.$`);
    // On the field itself, and listed in the save alert with its path.
    await page.locator('[id$="-id-error"]').filter({ hasText: duplicate }).waitFor({ state: 'visible' });
    assert.equal(await page.getByLabel('Candidate 2 id').getAttribute('aria-invalid'), 'true');
    await page.getByRole('alert').filter({ hasText: 'The server rejected' }).waitFor();
    await page.getByLabel('Candidate 2 id').fill('gamma');
    assert.equal(await page.getByLabel('Candidate 2 id').getAttribute('aria-invalid'), 'false');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByTestId('saved-document').waitFor();
    assert.deepEqual(await ids(), [first, 'gamma']);
    await screenshot(page, 'profile-candidates-desktop');
    // The rejected save is an HTTP error response, which Chromium logs; nothing else may appear.
    assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  } finally {
    await context.close();
  }
});

test("a candidate's dispatcher, provider, model and label are chosen in view, checked inline and saved", async () => {
  const { context, page, errors } = await openPage(browser, 'desktop');
  try {
    // The first candidate's dispatcher is chosen when the profile is created.
    const name = unique('Targets');
    const first = unique('sim');
    await page.goto(`${BASE_URL}/profiles/new`);
    await waitHydrated(page);
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('First candidate id').fill(first);
    const chosen = page.getByLabel('Its dispatcher');
    assert.equal(await chosen.inputValue(), 'external', 'the default is visible before creating');
    await chosen.selectOption('simulated');
    await page.getByText(/^Simulated: the built-in scripted provider/).waitFor();
    await page.getByRole('button', { name: 'Create profile' }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await waitHydrated(page);
    const id = new URL(page.url()).pathname.split('/')[2];
    const rows = page.locator('li[data-candidate-key]');
    assert.equal(await text(rows.nth(0).getByTestId('target-summary')), 'Dispatcher: simulated');

    // A new candidate opens with its target on screen: `external`, and changeable.
    await page.getByLabel('Add a candidate (its id)').fill('beta');
    await page.getByRole('button', { name: 'Add candidate' }).click();
    const beta = rows.nth(1);
    const target = beta.getByRole('group', { name: 'How this candidate is reached' });
    await target.waitFor({ state: 'visible' });
    const dispatcher = target.getByLabel('Dispatcher', { exact: true });
    assert.equal(await dispatcher.inputValue(), 'external');
    await target.getByText(/^External: another system runs the agent/).waitFor({ state: 'visible' });
    // Without a configuration file the server runs no `acp` or `http` candidates; those and
    // their agents and endpoints are runners.test.mjs's.
    await dispatcher.selectOption('simulated');
    await target.getByText(/^Simulated: the built-in scripted provider/).waitFor({ state: 'visible' });
    await target.getByLabel('Provider id (optional)').fill('anthropic');

    // The server's identifier check, inline: too long, then a character it may not hold, then fixed.
    const model = target.getByLabel('Model id (optional)');
    await model.fill('m'.repeat(129));
    await target.getByText('Use at most 128 characters for the model id.').waitFor({ state: 'visible' });
    assert.equal(await model.getAttribute('aria-invalid'), 'true');
    await model.fill('claude sonnet');
    await target.getByText(/^The model id may hold only letters, digits/).waitFor({ state: 'visible' });
    assert.equal(await model.getAttribute('aria-invalid'), 'true');
    // Saving with the bad value opens nothing new and sends nothing: it says what to fix.
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByText('Some values need fixing first; they are marked in red.').waitFor();
    await model.fill('claude-sonnet-4-5');
    assert.equal(await model.getAttribute('aria-invalid'), 'false');
    await target.getByLabel('Label (optional)').fill('Backup over HTTP');
    assert.equal(
      await text(beta.getByTestId('target-summary')),
      'Dispatcher: simulated · provider anthropic · model claude-sonnet-4-5',
    );
    await screenshot(page, 'profile-targets-desktop');

    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByTestId('saved-document').getByText(/Saved revision 2\./).waitFor();
    const stored = await api(`/api/v1/profiles/${id}`);
    assert.deepEqual(stored.body.targets, [
      { id: first, dispatcher: 'simulated' },
      {
        id: 'beta',
        dispatcher: 'simulated',
        provider_id: 'anthropic',
        model_id: 'claude-sonnet-4-5',
        label: 'Backup over HTTP',
      },
    ]);

    // Reload: the stored target is what the form shows.
    await page.reload();
    await waitHydrated(page);
    await page.getByRole('button', { name: 'Edit policies for beta' }).click();
    const reloaded = rows.nth(1).getByRole('group', { name: 'How this candidate is reached' });
    assert.equal(await reloaded.getByLabel('Dispatcher', { exact: true }).inputValue(), 'simulated');
    assert.equal(await reloaded.getByLabel('Provider id (optional)').inputValue(), 'anthropic');
    assert.equal(await reloaded.getByLabel('Model id (optional)').inputValue(), 'claude-sonnet-4-5');
    assert.equal(await reloaded.getByLabel('Label (optional)').inputValue(), 'Backup over HTTP');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
