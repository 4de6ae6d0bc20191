// A `recourse serve` of a test's own, with a configuration file (`--config`) listing ACP agents
// and HTTP endpoints, and a way to change that file and have the server reload it (SIGHUP).
// An agent without a `script` is never started by the tests that use it: its command only needs
// to be an absolute path. An agent with a `script` (the fake ACP agent's attempts, see
// fake-agent/src/main.rs) runs the real `fake-acp-agent` (RECOURSE_FAKE_AGENT, built by ./dev),
// logging what it received to `<dir>/<id>-log.jsonl`. Every agent's `allowed_roots` is one
// folder in the server's temp dir (`work`), the `cwd` of the routes' work.

import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ARTIFACTS } from './browser.mjs';
import { startServer } from './server.mjs';

const BIN = resolve(process.env.RECOURSE_BIN ?? 'target/release/recourse');
const FAKE_AGENT = resolve(process.env.RECOURSE_FAKE_AGENT ?? 'target/release/fake-acp-agent');

const quote = (s) => JSON.stringify(String(s)); // a TOML basic string

/**
 * The configuration file's text for `agents` (`{id, label?, provider_id?, script?}`) and `endpoints`
 * (`{id, label?, model, provider_id?}`); commands, roots, URLs and key names are filled in.
 */
function configText(dir, { agents = [], endpoints = [] }) {
  const root = join(dir, 'work');
  mkdirSync(root, { recursive: true });
  const lines = [];
  for (const a of agents) {
    lines.push('[[agent]]', `id = ${quote(a.id)}`);
    if (a.label) lines.push(`label = ${quote(a.label)}`);
    if (a.script) {
      const script = join(dir, `${a.id}-script.json`);
      writeFileSync(script, JSON.stringify({ attempts: a.script }));
      const args = ['--script', script, '--log', join(dir, `${a.id}-log.jsonl`)];
      lines.push(`command = ${quote(FAKE_AGENT)}`, `args = [${args.map(quote).join(', ')}]`);
    } else {
      lines.push(`command = ${quote(join(dir, 'bin', `${a.id}-acp`))}`);
    }
    lines.push(`allowed_roots = [${quote(root)}]`);
    if (a.provider_id) lines.push(`provider_id = ${quote(a.provider_id)}`);
    // Bounded waits for a real subprocess on a busy machine (a table: after the agent's keys).
    if (a.script) lines.push('[agent.timeouts]', 'step = 20', 'prompt_idle = 30', 'prompt_total = 60', 'exit_grace = 2');
    lines.push('');
  }
  for (const e of endpoints) {
    lines.push('[[endpoint]]', `id = ${quote(e.id)}`);
    if (e.label) lines.push(`label = ${quote(e.label)}`);
    lines.push('style = "openai"', 'base_url = "http://127.0.0.1:9/v1"', `model = ${quote(e.model ?? 'fake-model')}`);
    lines.push('api_key_env = "RECOURSE_E2E_FAKE_KEY"');
    if (e.provider_id) lines.push(`provider_id = ${quote(e.provider_id)}`);
    lines.push('');
  }
  return lines.join('\n');
}

/**
 * Starts `recourse serve --config FILE` on a temp database with `config`'s agents and endpoints.
 * Resolves with `{url, token, session, root, agentLog(id), reload(config), close()}`: `reload` rewrites the file, sends SIGHUP and
 * resolves once the server logged that it took the new file (it fails if the server refused it).
 */
export async function startConfigured(name, config) {
  const dir = mkdtempSync(join(tmpdir(), 'recourse-config-'));
  const file = join(dir, 'recourse.toml');
  writeFileSync(file, configText(dir, config));
  mkdirSync(ARTIFACTS, { recursive: true });
  const logPath = join(ARTIFACTS, `server-${name}.log`);
  let server;
  try {
    server = await startServer({ bin: BIN, cwd: dir, logPath, extraArgs: ['--config', file] });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const count = (what) => readFileSync(logPath, 'utf8').split(what).length - 1;
  return {
    url: server.url,
    /** Its administrator's API token and session cookie (`api(..., {base, token})`,
     * `openPage(browser, viewport, {session})`). */
    token: server.token,
    session: server.cookie,
    /** The folder every agent may work in (the `cwd` of a route's work). */
    root: join(dir, 'work'),
    /** What the scripted agent `id` received, one JSON object per line of its log. */
    agentLog(id) {
      let lines = [];
      try {
        lines = readFileSync(join(dir, `${id}-log.jsonl`), 'utf8').split('\n').filter(Boolean);
      } catch {
        // not started yet
      }
      return lines.map((l) => JSON.parse(l));
    },
    async reload(next) {
      const before = count('configuration reloaded');
      writeFileSync(file, configText(dir, next));
      server.child.kill('SIGHUP');
      const until = Date.now() + 10000;
      while (count('configuration reloaded') === before) {
        assert.equal(count('configuration reload refused'), 0, `the server refused the configuration (${logPath})`);
        assert.ok(Date.now() < until, `the server did not reload its configuration (${logPath})`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
