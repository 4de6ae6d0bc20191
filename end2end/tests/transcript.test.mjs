// What the agent is doing (issue 32, item 3), with a real subprocess agent: the scripted
// `fake-acp-agent` streams a message (with a key in it) and a tool call, holds until the test
// lets it go, then fails with Anthropic's overload. The route page shows both, live and
// redacted, while the attempt runs; after the failure the attempt says it failed after output
// and the route waits for a person; the timeline shows the failed attempt and the stop. The
// page is checked on both phones and a desktop (overflow, 44 px, axe; CSP through openPage).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  VIEWPORTS,
} from '../lib/browser.mjs';
import { startConfigured } from '../lib/runners.mjs';

const KEY = 'sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH';
const OVERLOADED = {
  error: {
    code: -32603,
    message: 'Internal error: API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
  },
};

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

test('the route page shows what the agent said and did, redacted, before its failure', async () => {
  const gateDir = mkdtempSync(join(tmpdir(), 'recourse-gate-'));
  const gate = join(gateDir, 'fail-now');
  const server = await startConfigured('transcript', {
    agents: [
      {
        id: 'talker',
        label: 'Talking agent',
        provider_id: 'anthropic',
        script: [
          {
            prompt: [
              { message: `Reading the build log. I found ANTHROPIC_API_KEY=${KEY} in .env` },
              {
                update: {
                  sessionUpdate: 'tool_call',
                  toolCallId: 'call_1',
                  kind: 'read',
                  title: 'Read build.log',
                  status: 'in_progress',
                },
              },
              { wait_file: gate },
              OVERLOADED,
            ],
          },
        ],
      },
    ],
  });
  const { context, page, errors } = await openPage(browser, 'desktop', { session: server.session });
  try {
    const profile = await api('/api/v1/profiles', {
      method: 'POST',
      base: server.url,
      token: server.token,
      body: {
        name: unique('Transcript'),
        targets: [{ id: 'talker', dispatcher: 'acp', runner: 'talker' }],
        policy: {
          version: 1,
          candidates: [
            {
              id: 'talker',
              transient: {
                retry: { enabled: true, max_retries: 3, initial_interval_seconds: 5 },
                wait_for_reset: { enabled: false, max_wait_seconds: 0 },
                on_exhausted: 'skip',
              },
              hard: {
                retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 },
                wait_for_reset: { enabled: false, max_wait_seconds: 0 },
                on_exhausted: 'stop',
              },
            },
          ],
        },
      },
    });
    assert.equal(profile.status, 201, JSON.stringify(profile.body));
    const started = await api('/api/v1/routes', {
      method: 'POST',
      base: server.url,
      token: server.token,
      body: {
        profile_id: profile.body.id,
        caller: { kind: 'kanban_task', reference: 'card-7', invocation_id: unique('inv') },
        work: { prompt: [{ type: 'text', text: 'Fix the build' }], cwd: server.root },
      },
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const routeId = started.body.id;

    await page.goto(`${server.url}/routes/${routeId}`);
    await waitHydrated(page);
    const transcripts = page.getByTestId('transcripts');
    // While the agent holds: its message and its tool call, redacted, and the route running.
    const message = transcripts.locator('[data-item="message"]').first();
    await message.getByText(/^Reading the build log\./).waitFor({ timeout: 60000 });
    const tool = transcripts.locator('[data-item="tool-call"]').first();
    await tool.getByText('Read build.log').waitFor({ timeout: 60000 });
    assert.equal((await tool.locator('[data-status]').textContent()).trim(), 'in_progress');
    assert.match(await tool.textContent(), /read/);
    const shownText = await message.textContent();
    assert.ok(!shownText.includes(KEY.slice(0, 24)) && !shownText.includes('Zq8vN2xYpL4mK7rT'), `the key is redacted: ${shownText}`);
    assert.ok(!(await page.content()).includes('Zq8vN2xYpL4mK7rT'), 'the key is nowhere in the page');
    await page.getByTestId('route-now').locator('[data-state]').first().waitFor();
    assert.notEqual(
      await page.getByTestId('route-now').locator('[data-state]').first().getAttribute('data-state'),
      'action_required',
      'shown before the failure',
    );
    await screenshot(page, 'transcript-running-desktop');

    // The failure: the attempt failed after output, so the route waits for a person.
    writeFileSync(gate, '');
    await page.getByTestId('route-now').locator('[data-state="action_required"]').waitFor({ timeout: 60000 });
    const attempt = transcripts.locator('details[data-attempt]').first();
    await attempt.getByText(/failed after output/).waitFor({ timeout: 30000 });
    assert.equal(await attempt.getAttribute('data-output'), 'true');
    await attempt.getByTestId('after-output').waitFor();
    await message.getByText(/^Reading the build log\./).waitFor();
    await tool.getByText('Read build.log').waitFor();
    // The timeline: the failed attempt on the candidate's lane, and the stop for a person.
    const timeline = page.getByTestId('timeline');
    await timeline.locator('rect[data-bar="failed"]').first().waitFor({ state: 'attached' });
    await timeline.locator('path[data-marker="needs-person"]').first().waitFor({ state: 'attached' });
    assert.match(await page.getByTestId('timeline-text').textContent(), /Attempt 1 on talker: .* failed\./);

    for (const viewport of Object.keys(VIEWPORTS)) {
      await page.setViewportSize(VIEWPORTS[viewport]);
      await page.reload();
      await waitHydrated(page);
      await transcripts.locator('[data-item="tool-call"]').first().waitFor();
      assert.deepEqual(await seriousA11yViolations(page), [], `axe (${viewport})`);
      assert.deepEqual(await shortControls(page), [], `44 px (${viewport})`);
      if (viewport !== 'desktop') {
        assert.ok((await documentOverflow(page)) <= 0, `no horizontal overflow (${viewport})`);
      }
      await screenshot(page, `transcript-failed-${viewport}`);
    }
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    await server.close();
    rmSync(gateDir, { recursive: true, force: true });
  }
});
