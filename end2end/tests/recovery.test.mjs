// A person's whole path with the published agents (issues 11, 28 and 35): the profile is made in
// the browser from the server's configured ACP agents, work is started through the REST API the
// way a caller starts it, and the route page shows, live, the first agent failing and the route
// moving to the second agent, which does the work. The first is Claude Code's ACP adapter, whose
// provider (the fake provider) refuses its key (a hard error: "Invalid API key", as Claude
// relays it); the second is Codex's ACP adapter, whose provider answers. Neither adapter
// exits when its input closes: the standby's success must count all the same. The test waits
// for that success and checks what came of it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, openPage, waitHydrated, screenshot, seriousA11yViolations, unique, api } from '../lib/browser.mjs';
import { startConfigured, publishedAgents } from '../lib/runners.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

const DONE = 'Done: the build is fixed.';

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

test('a route recovers from a failing agent onto a second one, watched on its page', async (t) => {
  if (!publishedAgents('recovery.test.mjs')) return t.skip('no RECOURSE_AGENTS_DIR');
  // The failing agent's provider holds its answer until the test creates this file, so the page
  // is seen running on it first and then, live, moving on.
  const gateDir = mkdtempSync(join(tmpdir(), 'recourse-gate-'));
  const gate = join(gateDir, 'fail-now');
  const server = await startConfigured('recovery', {
    agents: [
      {
        id: 'failing',
        label: 'Failing agent',
        provider_id: 'anthropic',
        published: 'claude',
        replies: [{ after_file: { path: gate, reply: { fail: { kind: 'invalid_key' } } } }],
      },
      { id: 'standby', label: 'Standby agent', provider_id: 'openai', published: 'codex', replies: [{ text: DONE }] },
    ],
  });
  const { context, page, errors } = await openPage(browser, 'desktop', { session: server.session });
  try {
    // The profile, from the configured agents, in the browser.
    await page.goto(`${server.url}/profiles/new`);
    await waitHydrated(page);
    const name = unique('Recovery');
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('First candidate id').fill('primary');
    await page.getByLabel('Its dispatcher').selectOption('acp');
    await page.getByLabel('Its agent').selectOption('failing');
    await page.getByRole('button', { name: 'Create profile' }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await waitHydrated(page);
    const profileId = new URL(page.url()).pathname.split('/')[2];
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
    // The standby's success: the route on it, its attempt over, a success in the history.
    await now.getByText(/^standby \(position 2, cycle \d+\)$/).waitFor({ timeout: 120000 });
    const history = page.getByTestId('history');
    await history.getByText(/· failed · candidate primary ·/).waitFor();
    await history.getByText(/· succeeded · candidate standby ·/).waitFor({ timeout: 120000 });
    assert.deepEqual(await seriousA11yViolations(page), [], 'axe (route recovered)');
    await screenshot(page, 'route-recovered-desktop');

    const snapshot = await api(`/api/v1/routes/${routeId}`, { base: server.url, token: server.token });
    assert.equal(snapshot.status, 200);
    const s = snapshot.body.route.snapshot;
    assert.equal(s.candidate_id, 'standby', JSON.stringify(s));
    assert.equal(s.state, 'active');
    assert.equal(s.attempt, null, 'the standby finished its attempt');
    const failed = snapshot.body.history.find((e) => e.event === 'failed');
    assert.equal(failed.candidate_id, 'primary');
    assert.equal(failed.classification.code, 'auth_required', JSON.stringify(failed.classification));
    assert.equal(failed.classification.class, 'hard');
    const succeeded = snapshot.body.history.find((e) => e.event === 'succeeded');
    assert.ok(succeeded, JSON.stringify(snapshot.body.history));
    assert.equal(succeeded.candidate_id, 'standby');
    assert.ok(s.cycle >= 2, 'a success starts a new cycle');

    // What the providers saw: one call each, the same work; the failing agent was never
    // prompted again (its own retries are off and Recourse stopped for nothing else).
    const failing = server.providerLog('failing');
    const standby = server.providerLog('standby');
    assert.equal(failing.length, 1, JSON.stringify(failing.map((r) => r.path)));
    assert.equal(standby.length, 1, JSON.stringify(standby.map((r) => r.path)));
    assert.match(failing[0].path, /\/v1\/messages/);
    assert.match(standby[0].path, /\/responses$/);
    assert.match(JSON.stringify(failing[0].body), /Fix the build/);
    assert.match(JSON.stringify(standby[0].body), /Fix the build/);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await server.close();
    rmSync(gateDir, { recursive: true, force: true });
  }
});
