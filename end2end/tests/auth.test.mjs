// Signing in and what each person may do, in a real browser on desktop and on a phone: a page
// without a session goes to the login page; a profile manager signs in there, lands back on the
// page and edits a policy; an Office-only account sees the policy read-only, with no edit
// controls, and the server refuses its save even when sent by hand. A page on another port
// (another origin, the same site) cannot write with the administrator's cookie.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { launch, openPage, waitHydrated, screenshot, documentOverflow, unique, api, BASE_URL } from '../lib/browser.mjs';

const PASSWORD = 'a long enough passphrase';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** An account made by the administrator through the API. */
async function account(role) {
  const name = unique(role).toLowerCase();
  const res = await api('/api/v1/accounts', { method: 'POST', body: { name, role, password: PASSWORD } });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return name;
}

/** A profile made through the API; its id. */
async function profile() {
  const res = await api('/api/v1/profiles', {
    method: 'POST',
    body: {
      name: unique('Signed'),
      policy: {
        version: 1,
        candidates: [
          {
            id: 'main',
            transient: { retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 }, wait_for_reset: { enabled: false, max_wait_seconds: 0 }, on_exhausted: 'skip' },
            hard: { retry: { enabled: false, max_retries: 0, initial_interval_seconds: 0 }, wait_for_reset: { enabled: false, max_wait_seconds: 0 }, on_exhausted: 'skip' },
          },
        ],
      },
    },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.id;
}

/** Opens `path` without a session, is sent to the login page, signs in, and is sent back. */
async function signInAt(page, path, name) {
  await page.goto(`${BASE_URL}${path}`);
  assert.equal(new URL(page.url()).pathname, '/login', 'no session: the login page');
  await page.getByRole('heading', { name: 'Sign in', level: 1 }).waitFor();
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => u.pathname === path);
  await waitHydrated(page);
  assert.equal((await page.getByTestId('signed-in-as').first().textContent()).trim(), name);
}

for (const viewport of ['desktop', 'phone']) {
  test(`a profile manager signs in and edits a policy; an Office account may not (${viewport})`, async () => {
    const id = await profile();
    const manager = await account('profile_manager');
    const office = await account('office');

    // The profile manager.
    {
      const { context, page, errors } = await openPage(browser, viewport, { session: null });
      try {
        // A wrong password: one message, still on the login page.
        await page.goto(`${BASE_URL}/profiles/${id}`);
        await page.getByLabel('Name').fill(manager);
        await page.getByLabel('Password').fill('not the password at all');
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByTestId('login-error').getByText('The name or the password is wrong.').waitFor();
        await signInAt(page, `/profiles/${id}`, manager);
        // The profile as text first; its editor is a page of its own.
        await page.getByTestId('read-only-policy').waitFor();
        await page.getByRole('link', { name: 'Edit profile' }).click();
        await page.waitForURL((u) => u.pathname === `/profiles/${id}/edit`);
        await page.getByRole('button', { name: /Edit policies for main/ }).click();
        const transient = page.getByRole('region', { name: 'Transient errors' });
        await transient.getByRole('switch', { name: /Retry the same candidate/ }).click();
        await transient.getByLabel('Maximum retries').fill('2');
        await page.getByRole('button', { name: 'Save profile' }).click();
        await page.getByTestId('saved-document').getByText(/Saved revision \d+\./).waitFor();
        assert.ok((await documentOverflow(page)) <= 0, 'no horizontal overflow');
        await screenshot(page, `signed-in-manager-${viewport}`);
        const stored = await api(`/api/v1/profiles/${id}`);
        assert.equal(stored.body.policy.candidates[0].transient.retry.max_retries, 2);
        assert.deepEqual(errors, []);
      } finally {
        await context.close();
      }
    }

    // The Office account: the policy is shown, nothing to edit, and the server says no.
    {
      const { context, page, errors } = await openPage(browser, viewport, { session: null });
      try {
        await signInAt(page, `/profiles/${id}`, office);
        await page.getByTestId('read-only-policy').getByText('retry up to 2 times', { exact: false }).waitFor();
        await page.getByTestId('not-yours').first().getByText(/manage_profiles/).waitFor();
        assert.equal(await page.getByRole('button', { name: 'Save profile' }).count(), 0, 'no save control');
        assert.equal(await page.getByRole('button', { name: /Edit policies/ }).count(), 0, 'no edit control');
        assert.equal(await page.getByRole('link', { name: 'Edit profile' }).count(), 0, 'no link to the editor');
        // The editor's address, typed: it says whose editing is, and offers nothing to edit.
        await page.goto(`${BASE_URL}/profiles/${id}/edit`);
        await waitHydrated(page);
        await page.getByTestId('not-yours').getByText(/manage_profiles/).waitFor();
        assert.equal(await page.getByRole('button', { name: 'Save profile' }).count(), 0, 'no save control on the editor page');
        assert.equal(await page.locator('main').getByRole('textbox').count(), 0, 'no field on the editor page');
        await page.goto(`${BASE_URL}/profiles`);
        await waitHydrated(page);
        assert.equal(await page.getByRole('button', { name: 'Create profile' }).count(), 0, 'no create control');
        assert.equal(await page.getByRole('link', { name: 'New profile' }).count(), 0, 'no link to the form');
        await page.getByTestId('not-yours').getByText(/Creating and deleting profiles is for/).waitFor();
        await page.goto(`${BASE_URL}/profiles/new`);
        await waitHydrated(page);
        await page.getByTestId('not-yours').getByText(/Creating profiles is for/).waitFor();
        assert.equal(await page.getByRole('button', { name: 'Create profile' }).count(), 0, 'no create control on the form page');
        await page.goto(`${BASE_URL}/profiles`);
        await waitHydrated(page);
        assert.equal(await page.getByRole('button', { name: /^Delete/ }).count(), 0, 'no delete control');
        await screenshot(page, `signed-in-office-${viewport}`);
        assert.deepEqual(errors, []);
        // By hand, from the page (its own origin, its session): 403 naming the permission (the
        // browser logs the refused request; that one is expected).
        const refused = await page.evaluate(async (id) => {
          const res = await fetch(`/api/v1/profiles/${id}`, { method: 'DELETE' });
          return { status: res.status, body: await res.json() };
        }, id);
        assert.equal(refused.status, 403);
        assert.match(refused.body.error.message, /`manage_profiles`/);
        errors.splice(0, errors.length, ...errors.filter((e) => !e.includes('status of 403')));
        // Signing out ends the session: the next page is the login page.
        const signOut = page.getByRole('button', { name: 'Sign out' });
        if (!(await signOut.isVisible())) await page.getByRole('button', { name: 'Menu' }).click();
        await signOut.click();
        await page.waitForURL((u) => u.pathname === '/login');
        await page.goto(`${BASE_URL}/profiles`);
        assert.equal(new URL(page.url()).pathname, '/login');
        assert.deepEqual(errors, []);
      } finally {
        await context.close();
      }
    }
  });
}

test('a page on another port cannot write with the signed-in cookie', async () => {
  const name = unique('csrf');
  const target = `${BASE_URL}/api/v1/profiles`;
  const body = JSON.stringify({ name, policy: { version: 1, candidates: [] } });
  // Another origin on the same machine: the same site, so a SameSite=Lax cookie would go along.
  const html = `<!doctype html><title>elsewhere</title>
    <form id="f" method="post" action="${target}" enctype="text/plain"><input name='${body.slice(0, -1)},"x":"' value='"}'></form>
    <script>
      window.tried = (async () => {
        try {
          await fetch(${JSON.stringify(target)}, { method: 'POST', mode: 'no-cors', credentials: 'include',
            headers: { 'content-type': 'text/plain' }, body: ${JSON.stringify(body)} });
        } catch (e) {}
        return true;
      })();
    </script>`;
  const evil = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(html);
  });
  await new Promise((ok) => evil.listen(0, '127.0.0.1', ok));
  const { context, page } = await openPage(browser, 'desktop');
  try {
    await page.goto(`${BASE_URL}/profiles`);
    await waitHydrated(page);
    const elsewhere = `http://127.0.0.1:${evil.address().port}/`;
    await page.goto(elsewhere);
    await page.evaluate(() => window.tried);
    const submitted = page.waitForResponse((r) => r.url() === target);
    await page.evaluate(() => document.getElementById('f').submit());
    const answer = await submitted;
    assert.equal(answer.status(), 403, 'the form post is refused');
    const list = await api('/api/v1/profiles');
    assert.ok(!list.body.some((p) => p.name === name), 'nothing was created');
  } finally {
    await context.close();
    evil.close();
  }
});

test('an administrator reads the audit log in the UI', async () => {
  const { context, page, errors } = await openPage(browser, 'phone');
  try {
    await page.goto(`${BASE_URL}/audit`);
    await waitHydrated(page);
    await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
    await page.getByTestId('audit-list').locator('[data-action="session.login"]').first().waitFor();
    assert.ok((await documentOverflow(page)) <= 0, 'no horizontal overflow');
    await screenshot(page, 'audit-phone');
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
