// Starting and stopping a real `recourse serve` for the browser tests and the checks in `./dev`:
// a free port, a temporary database, and a stop that waits for the process to exit.
//
// Nothing but /healthz and the login page answers without credentials, so before the server
// starts, its database gets an administrator (`recourse user add`, the password on standard
// input) and an API token (`recourse token add`), and once it is up the administrator signs in
// once (`POST /api/v1/session`): scripts send the token, browser pages carry the session
// cookie (see `end2end/lib/browser.mjs`).

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

export async function waitHealthy(url, child, deadlineMs) {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`recourse serve exited early (${child.exitCode ?? child.signalCode})`);
    }
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`recourse serve did not become healthy within ${deadlineMs} ms`);
}

/** Stops the child with SIGTERM (SIGKILL after `graceMs`); resolves with its exit code or signal. */
export function stop(child, graceMs) {
  return new Promise((ok) => {
    if (child.exitCode !== null || child.signalCode !== null) return ok(child.exitCode ?? child.signalCode);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      ok(code ?? signal);
    });
    child.kill('SIGTERM');
  });
}

/** The administrator every test run signs in as. */
export const ADMIN = { name: 'e2e-admin', password: 'end-to-end admin passphrase' };

/**
 * Makes an account (`role`) in the database at `db` with the real `recourse user add`, and an
 * API token for it with `recourse token add` (every permission of the role); returns the token.
 */
export function addAccount(bin, db, { name, password, role }) {
  execFileSync(bin, ['user', 'add', name, '--role', role, '--database', db], { input: `${password}\n`, stdio: ['pipe', 'ignore', 'pipe'] });
  return execFileSync(bin, ['token', 'add', '--account', name, '--name', 'end2end', '--permissions', 'all', '--database', db], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
    .toString()
    .trim();
}

/** Signs in through the API; returns the session cookie as `name=value`. */
export async function signIn(url, { name, password }) {
  const res = await fetch(`${url}/api/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, password }),
  });
  if (res.status !== 204) throw new Error(`signing in as ${name} answered ${res.status}`);
  const cookie = res.headers.getSetCookie().find((c) => c.startsWith('recourse_session='));
  if (!cookie) throw new Error('signing in set no session cookie');
  return cookie.split(';')[0];
}

/**
 * Starts `bin serve` on a free loopback port with a database in a new temporary folder, from
 * `cwd`, logging to `logPath`. Resolves once `/healthz` answers, with the administrator's API
 * `token` and session `cookie`; `close()` stops the server and removes the folder.
 */
export async function startServer({ bin, cwd, logPath, extraArgs = [], env = {} }) {
  const dir = mkdtempSync(join(tmpdir(), 'recourse-'));
  const db = join(dir, 'recourse.db');
  const token = addAccount(bin, db, { ...ADMIN, role: 'admin' });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = openSync(logPath, 'w');
  const child = spawn(bin, ['serve', '--addr', `127.0.0.1:${port}`, '--database', db, ...extraArgs], {
    cwd,
    stdio: ['ignore', log, log],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info', RECOURSE_LOG_FORMAT: 'json', ...env },
  });
  let exit = null;
  const close = async () => {
    exit ??= stop(child, 5000);
    const code = await exit;
    rmSync(dir, { recursive: true, force: true });
    return code;
  };
  let cookie;
  try {
    await waitHealthy(url, child, 30000);
    cookie = await signIn(url, ADMIN);
  } catch (err) {
    await close();
    throw err;
  }
  return { url, child, close, token, cookie, db };
}
