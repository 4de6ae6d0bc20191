// A person's whole path with real agents (issue 11): the profile is made in the browser from the
// server's configured ACP agents, work is started through the REST API the way a caller starts
// it, and the route page shows, live, the first agent failing (Anthropic's credit exhaustion as
// claude-code-acp relays it: a hard error) and the route moving to the second agent, which does
// the work. Both agents are the real `fake-acp-agent` subprocess over real pipes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, openPage, waitHydrated, screenshot, seriousA11yViolations, unique, api } from '../lib/browser.mjs';
import { startConfigured } from '../lib/runners.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

const CREDITS = {
  error: {
    code: -32603,
    message:
      'Internal error: API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}',
  },
};
const DONE = [{ message: 'Done: the build is fixed.' }, { respond: { stopReason: 'end_turn' } }];

async function until(what, check, ms = 60000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < end, `timed out waiting: ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The candidate row `n` (0-based) with its target group visible. */
async function targetOf(page, n) {
  const row = page.locator('li[data-candidate-key]').nth(n);
  const toggle = row.getByRole('button', { name: /^(Edit|Hide) policies/ });
  if ((await toggle.getAttribute('aria-expanded')) === 'false') await toggle.click();
  const target = row.getByRole('group', { name: 'How this candidate is reached' });
  await target.waitFor({ state: 'visible' });
  return target;
}

test('a route recovers from a failing agent onto a second one, watched on its page', async () => {
  // The failing agent holds its failure until the test creates this file, so the page is seen
  // running on it first and then, live, moving on.
  const gateDir = mkdtempSync(join(tmpdir(), 'recourse-gate-'));
  const gate = join(gateDir, 'fail-now');
  const server = await startConfigured('recovery', {
    agents: [
      {
        id: 'failing',
        label: 'Failing agent',
        provider_id: 'anthropic',
        script: [{ prompt: [{ wait_file: gate }, CREDITS] }],
      },
      { id: 'standby', label: 'Standby agent', provider_id: 'google', script: [{ prompt: DONE }] },
    ],
  });
  const { context, page, errors } = await openPage(browser, 'desktop', { session: server.session });
  try {
    // The profile, from the configured agents, in the browser.
    await page.goto(`${server.url}/profiles`);
    await waitHydrated(page);
    const name = unique('Recovery');
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('First candidate id').fill('primary');
    await page.getByLabel('Its dispatcher').selectOption('acp');
    await page.getByLabel('Its agent').selectOption('failing');
    await page.getByRole('button', { name: 'Create profile' }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await waitHydrated(page);
    const profileId = new URL(page.url()).pathname.split('/').pop();
    await page.getByLabel('Add a candidate (its id)').fill('standby');
    await page.getByRole('button', { name: 'Add candidate' }).click();
    const second = await targetOf(page, 1);
    await second.getByLabel('Dispatcher', { exact: true }).selectOption('acp');
    await second.getByLabel('Agent', { exact: true }).selectOption('standby');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByTestId('saved-document').getByText(/Saved revision 2\./).waitFor();

    // A caller starts work (the prompt and the folder the agents work in).
    const started = await api('/api/v1/routes', {
      base: server.url,
      token: server.token,
      method: 'POST',
      body: {
        profile_id: profileId,
        caller: { kind: 'kanban_task', reference: 'card-42', invocation_id: unique('inv') },
        work: { prompt: [{ type: 'text', text: 'Fix the build' }], cwd: server.root },
      },
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const routeId = started.body.id;

    // Its page, live: running on the first agent; then its failure, and the second agent
    // running the work, without a reload.
    await page.goto(`${server.url}/routes/${routeId}`);
    await waitHydrated(page);
    const now = page.getByTestId('route-now');
    await now.getByText(/^primary \(position 1, cycle \d+\)$/).waitFor();
    await page.getByTestId('live-status').getByText(/^Live: changes appear here/).waitFor();
    await screenshot(page, 'route-on-failing-agent-desktop');
    writeFileSync(gate, '');
    await now.getByText(/^standby \(position 2, cycle \d+\)$/).waitFor({ timeout: 60000 });
    await now.locator('[data-state=active]').getByText('Running', { exact: true }).waitFor();
    const history = page.getByTestId('history');
    await history.getByText(/· failed · candidate primary ·/).waitFor();
    await history.getByText(/· candidate standby ·/).first().waitFor();
    assert.deepEqual(await seriousA11yViolations(page), [], 'axe (route recovered)');
    await screenshot(page, 'route-recovered-desktop');

    // What the agents themselves saw: one prompt each, the same work, in the configured folder.
    const prompts = (id) => server.agentLog(id).filter((l) => l.recv?.method === 'session/prompt');
    await until('the standby agent got the prompt', () => prompts('standby').length === 1);
    assert.equal(prompts('failing').length, 1, 'the failing agent was prompted once, never again');
    assert.deepEqual(prompts('standby')[0].recv.params.prompt, [{ type: 'text', text: 'Fix the build' }]);
    const snapshot = await api(`/api/v1/routes/${routeId}`, { base: server.url, token: server.token });
    assert.equal(snapshot.status, 200);
    assert.equal(snapshot.body.route.snapshot.candidate_id, 'standby');
    assert.equal(snapshot.body.route.snapshot.state, 'active');
    const failed = snapshot.body.history.find((e) => e.event === 'failed');
    assert.equal(failed.candidate_id, 'primary');
    assert.equal(failed.classification.class, 'hard', JSON.stringify(failed.classification));
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await server.close();
    rmSync(gateDir, { recursive: true, force: true });
  }
});
