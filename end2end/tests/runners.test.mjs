// What the server's configuration file offers the profile forms (issue 11, item 1): without a
// file only `simulated` and `external` are offered and the page says why; with one, `acp` and
// `http` candidates name its agents and endpoints, save and reload; a profile naming an agent
// the configuration no longer has shows it as not configured, the server's refusal lands on the
// agent's select, and nothing changes until the person changes it. Phone and desktop, axe-clean.

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
} from '../lib/browser.mjs';
import { startConfigured } from '../lib/runners.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

const WHERE =
  'an operator adds them to the configuration file given to recourse serve --config (README, "Agents and endpoints").';
const NOTHING_CONFIGURED = `No ACP agents or HTTP endpoints are configured on this server; ${WHERE}`;
const NO_AGENTS = `No ACP agents are configured on this server, so acp is not offered; ${WHERE}`;
const AGENT_GONE =
  "The server's configuration has no agent with this id; choose one it lists, or ask an operator to add it.";
const NOT_CONFIGURED = ' (not configured on this server)';

const AGENTS = [
  { id: 'fake-agent', label: 'Fake agent', provider_id: 'fake-ai' },
  { id: 'backup-agent', provider_id: 'fake-ai' },
];
const ENDPOINTS = [{ id: 'fake-endpoint', label: 'Fake endpoint', model: 'fake-model', provider_id: 'fake-api' }];

async function text(locator) {
  return (await locator.textContent()).trim();
}

async function optionTexts(select) {
  return select.locator('option').evaluateAll((os) => os.map((o) => o.textContent.trim()));
}

async function optionValues(select) {
  return select.locator('option').evaluateAll((os) => os.map((o) => o.value));
}

/** The ids an element's aria-describedby names. */
async function describedBy(locator) {
  return ((await locator.getAttribute('aria-describedby')) ?? '').split(/\s+/).filter(Boolean);
}

/** Serious axe findings, controls under 44 px and horizontal overflow: all must be empty. */
async function assertPageStandards(page, where) {
  assert.deepEqual(await seriousA11yViolations(page), [], `axe (${where})`);
  assert.deepEqual(await shortControls(page), [], `44 px controls (${where})`);
  assert.ok((await documentOverflow(page)) <= 0, `no horizontal overflow (${where})`);
}

/** The candidate row `n` (0-based), its policy area opened, and its target group. */
async function openRow(page, n) {
  const row = page.locator('li[data-candidate-key]').nth(n);
  const toggle = row.getByRole('button', { name: /^(Edit|Hide) policies/ });
  if ((await toggle.getAttribute('aria-expanded')) === 'false') await toggle.click();
  const target = row.getByRole('group', { name: 'How this candidate is reached' });
  await target.waitFor({ state: 'visible' });
  return { row, target };
}

for (const viewport of ['desktop', 'phone']) {
  test(`without a configuration file only simulated and external are offered, and the page says so (${viewport})`, async () => {
    const { context, page, errors } = await openPage(browser, viewport);
    try {
      await page.goto(`${BASE_URL}/profiles/new`);
      await waitHydrated(page);
      const chosen = page.getByLabel('Its dispatcher');
      assert.deepEqual(await optionValues(chosen), ['simulated', 'external']);
      const note = page.getByTestId('runners-note');
      assert.equal(await text(note), NOTHING_CONFIGURED);
      assert.ok((await describedBy(chosen)).includes(await note.getAttribute('id')), 'the note describes the select');
      await assertPageStandards(page, `profiles, ${viewport}`);
      await screenshot(page, `runners-none-new-${viewport}`);

      // The editor of a candidate says the same where its dispatcher is chosen.
      const name = unique(`No runners ${viewport}`);
      await page.getByLabel('Name', { exact: true }).fill(name);
      await page.getByLabel('First candidate id').fill('main');
      await page.getByRole('button', { name: 'Create profile' }).click();
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      await waitHydrated(page);
      const { target } = await openRow(page, 0);
      const dispatcher = target.getByLabel('Dispatcher', { exact: true });
      assert.deepEqual(await optionValues(dispatcher), ['simulated', 'external']);
      const rowNote = target.getByTestId('runners-note');
      assert.equal(await text(rowNote), NOTHING_CONFIGURED);
      assert.ok((await describedBy(dispatcher)).includes(await rowNote.getAttribute('id')));
      await assertPageStandards(page, `editor, ${viewport}`);
      await screenshot(page, `runners-none-editor-${viewport}`);
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
}

test('with a configuration, an acp candidate names a configured agent and an http candidate an endpoint; both save and reload', async () => {
  const server = await startConfigured('runners-configured', { agents: AGENTS, endpoints: ENDPOINTS });
  const { context, page, errors } = await openPage(browser, 'desktop', { session: server.session });
  try {
    await page.goto(`${server.url}/profiles/new`);
    await waitHydrated(page);
    const chosen = page.getByLabel('Its dispatcher');
    assert.deepEqual(await optionValues(chosen), ['simulated', 'acp', 'http', 'external']);
    assert.equal(await page.getByTestId('runners-note').count(), 0, 'nothing to say when both are configured');

    // The first candidate: acp, on the second agent.
    const name = unique('Configured');
    const first = unique('agent');
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('First candidate id').fill(first);
    await chosen.selectOption('acp');
    const agent = page.getByLabel('Its agent');
    assert.deepEqual(await optionTexts(agent), ['Fake agent (fake-agent)', 'backup-agent']);
    assert.equal(await agent.inputValue(), 'fake-agent', 'a configured agent is picked in view');
    await page.getByText("From the server's configuration: provider fake-ai.").waitFor();
    await agent.selectOption('backup-agent');
    await assertPageStandards(page, 'new profile with an agent');
    await screenshot(page, 'runners-new-acp-desktop');
    await page.getByRole('button', { name: 'Create profile' }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await waitHydrated(page);
    const id = new URL(page.url()).pathname.split('/')[2];
    const rows = page.locator('li[data-candidate-key]');
    // The server filled the provider from the agent's configuration.
    assert.equal(
      await text(rows.nth(0).getByTestId('target-summary')),
      'Dispatcher: acp · agent backup-agent · provider fake-ai',
    );

    // The second candidate: http, on the endpoint.
    await page.getByLabel('Add a candidate (its id)').fill('utility');
    await page.getByRole('button', { name: 'Add candidate' }).click();
    const { target } = await openRow(page, 1);
    const dispatcher = target.getByLabel('Dispatcher', { exact: true });
    assert.equal(await dispatcher.inputValue(), 'external');
    assert.deepEqual(await optionValues(dispatcher), ['simulated', 'acp', 'http', 'external']);
    await dispatcher.selectOption('http');
    const endpoint = target.getByLabel('Endpoint', { exact: true });
    assert.deepEqual(await optionTexts(endpoint), ['Fake endpoint (fake-endpoint)']);
    assert.equal(await endpoint.inputValue(), 'fake-endpoint');
    await target.getByText("From the server's configuration: provider fake-api · model fake-model.").waitFor();
    assert.equal(await endpoint.getAttribute('aria-invalid'), 'false');
    assert.equal(await text(rows.nth(1).getByTestId('target-summary')), 'Dispatcher: http · endpoint fake-endpoint');
    await assertPageStandards(page, 'editor with acp and http');
    await screenshot(page, 'runners-editor-desktop');

    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByTestId('saved-document').getByText(/Saved revision 2\./).waitFor();
    const stored = await api(`/api/v1/profiles/${id}`, { base: server.url, token: server.token });
    assert.deepEqual(stored.body.targets, [
      { id: first, dispatcher: 'acp', runner: 'backup-agent', provider_id: 'fake-ai' },
      { id: 'utility', dispatcher: 'http', runner: 'fake-endpoint', provider_id: 'fake-api', model_id: 'fake-model' },
    ]);

    // Reload: the stored targets are what the form shows.
    await page.reload();
    await waitHydrated(page);
    const a = (await openRow(page, 0)).target;
    assert.equal(await a.getByLabel('Dispatcher', { exact: true }).inputValue(), 'acp');
    assert.equal(await a.getByLabel('Agent', { exact: true }).inputValue(), 'backup-agent');
    const h = (await openRow(page, 1)).target;
    assert.equal(await h.getByLabel('Dispatcher', { exact: true }).inputValue(), 'http');
    assert.equal(await h.getByLabel('Endpoint', { exact: true }).inputValue(), 'fake-endpoint');
    assert.deepEqual(errors, []);

    // The same page on a phone: one column, nothing wider than the screen, axe-clean.
    const phone = await openPage(browser, 'phone', { session: server.session });
    try {
      await phone.page.goto(`${server.url}/profiles/${id}/edit`);
      await waitHydrated(phone.page);
      await openRow(phone.page, 0);
      await openRow(phone.page, 1);
      await assertPageStandards(phone.page, 'editor with acp and http, phone');
      await screenshot(phone.page, 'runners-editor-phone');
      assert.deepEqual(phone.errors, []);
    } finally {
      await phone.context.close();
    }
  } finally {
    await context.close();
    await server.close();
  }
});

test('an agent the configuration no longer has is shown as not configured, refused by the server on its select, and changed only by the person', async () => {
  const server = await startConfigured('runners-reloaded', { agents: AGENTS, endpoints: ENDPOINTS });
  const { context, page, errors } = await openPage(browser, 'desktop', { session: server.session });
  try {
    // Stored while both agents are configured.
    const created = await api('/api/v1/profiles', {
      base: server.url,
      token: server.token,
      method: 'POST',
      body: {
        name: unique('Reloaded'),
        targets: [
          { id: 'a', dispatcher: 'acp', runner: 'backup-agent' },
          { id: 'b', dispatcher: 'acp', runner: 'fake-agent' },
        ],
        policy: { on_error: 'try_next', candidates: [{ id: 'a' }, { id: 'b' }] },
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id;
    const storedTargets = created.body.targets;

    // The operator removes backup-agent and reloads.
    await server.reload({ agents: [AGENTS[0]], endpoints: ENDPOINTS });
    await page.goto(`${server.url}/profiles/${id}/edit`);
    await waitHydrated(page);
    const rows = page.locator('li[data-candidate-key]');
    assert.equal(
      await text(rows.nth(0).getByTestId('target-summary')),
      `Dispatcher: acp · agent backup-agent${NOT_CONFIGURED} · provider fake-ai`,
    );
    const a = (await openRow(page, 0)).target;
    const agentA = a.getByLabel('Agent', { exact: true });
    assert.equal(await agentA.inputValue(), 'backup-agent', 'kept as stored');
    assert.deepEqual(await optionTexts(agentA), [`backup-agent${NOT_CONFIGURED}`, 'Fake agent (fake-agent)']);
    assert.equal(await agentA.getAttribute('aria-invalid'), 'true');
    const errorA = a.getByText(AGENT_GONE);
    await errorA.waitFor({ state: 'visible' });
    assert.ok((await describedBy(agentA)).includes(await errorA.getAttribute('id')), 'the message describes the select');
    await assertPageStandards(page, 'agent not configured, desktop');
    await screenshot(page, 'runners-agent-gone-desktop');

    // Saving as it is sends nothing: the form says what to fix.
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByText('Some values need fixing first; they are marked in red.').waitFor();
    let stored = await api(`/api/v1/profiles/${id}`, { base: server.url, token: server.token });
    assert.equal(stored.body.revision, 1);
    assert.deepEqual(stored.body.targets, storedTargets);

    // The person picks the agent that is configured; then the operator removes every agent
    // before the save arrives: the server's refusal lands on both agent selects.
    await agentA.selectOption('fake-agent');
    assert.equal(await agentA.getAttribute('aria-invalid'), 'false');
    await server.reload({ agents: [], endpoints: ENDPOINTS });
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByRole('alert').filter({ hasText: 'The server rejected 2 values' }).waitFor();
    const b = (await openRow(page, 1)).target;
    for (const [target, which] of [
      [a, 'a'],
      [b, 'b'],
    ]) {
      const select = target.getByLabel('Agent', { exact: true });
      await target.getByText(AGENT_GONE).waitFor({ state: 'visible' });
      assert.equal(await select.getAttribute('aria-invalid'), 'true', `candidate ${which}`);
    }
    stored = await api(`/api/v1/profiles/${id}`, { base: server.url, token: server.token });
    assert.equal(stored.body.revision, 1, 'nothing was written');
    await screenshot(page, 'runners-refused-desktop');

    // A fresh page under a configuration without agents: acp is shown, marked, with what to do.
    await page.reload();
    await waitHydrated(page);
    const again = (await openRow(page, 0)).target;
    const dispatcher = again.getByLabel('Dispatcher', { exact: true });
    assert.equal(await dispatcher.inputValue(), 'acp');
    assert.deepEqual(await optionTexts(dispatcher), ['simulated', `acp${NOT_CONFIGURED}`, 'http', 'external']);
    assert.equal(await dispatcher.getAttribute('aria-invalid'), 'true');
    await again.getByText(/^This server's configuration lists no ACP agents, so this candidate is never tried\./).waitFor();
    assert.equal(await text(again.getByTestId('runners-note')), NO_AGENTS);
    await assertPageStandards(page, 'no agents, desktop');
    const phone = await openPage(browser, 'phone', { session: server.session });
    try {
      await phone.page.goto(`${server.url}/profiles/${id}/edit`);
      await waitHydrated(phone.page);
      await openRow(phone.page, 0);
      await openRow(phone.page, 1);
      await assertPageStandards(phone.page, 'no agents, phone');
      await screenshot(phone.page, 'runners-no-agents-phone');
      assert.deepEqual(phone.errors, []);
    } finally {
      await phone.context.close();
    }

    // The person moves both candidates to what the server runs; now it saves.
    await dispatcher.selectOption('http');
    assert.equal(await again.getByLabel('Endpoint', { exact: true }).inputValue(), 'fake-endpoint');
    const second = (await openRow(page, 1)).target;
    await second.getByLabel('Dispatcher', { exact: true }).selectOption('external');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByTestId('saved-document').getByText(/Saved revision 2\./).waitFor();
    stored = await api(`/api/v1/profiles/${id}`, { base: server.url, token: server.token });
    assert.deepEqual(
      stored.body.targets.map((t) => [t.id, t.dispatcher, t.runner ?? null]),
      [
        ['a', 'http', 'fake-endpoint'],
        ['b', 'external', null],
      ],
    );
    // The rejected save is an HTTP error response, which Chromium logs; nothing else may appear.
    assert.deepEqual(errors.filter((e) => !/Failed to load resource/.test(e)), []);
  } finally {
    await context.close();
    await server.close();
  }
});
