// A `recourse serve` of a test's own, with a configuration file (`--config`) listing ACP agents
// and HTTP endpoints, and a way to change that file and have the server reload it (SIGHUP).
// An agent without a `script` is never started by the tests that use it: its command only needs
// to be an absolute path. An agent with a `script` (the fake ACP agent's attempts, see
// fake-agent/src/main.rs) runs the real `fake-acp-agent` (RECOURSE_FAKE_AGENT, built by ./dev),
// logging what it received to `<dir>/<id>-log.jsonl`. Every agent's `allowed_roots` is one
// folder in the server's temp dir (`work`), the `cwd` of the routes' work.
//
// An agent with `published: 'claude' | 'codex'` is the real published agent from
// RECOURSE_AGENTS_DIR (installed by ./dev, scripts/agents.sh), pointed at a `fake-provider`
// process (RECOURSE_FAKE_PROVIDER, built by ./dev) that plays the agent's `replies` (see
// fake-provider/src/reply.rs) under the prefix of its id; a HOME of its own, telemetry and
// auto-update off, its own retries off, dummy keys by name: the settings README recommends,
// as server/tests/common/agents.rs writes them for the Rust tests.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ARTIFACTS } from './browser.mjs';
import { startServer } from './server.mjs';

const BIN = resolve(process.env.RECOURSE_BIN ?? 'target/release/recourse');
const FAKE_AGENT = resolve(process.env.RECOURSE_FAKE_AGENT ?? 'target/release/fake-acp-agent');
const FAKE_PROVIDER = resolve(process.env.RECOURSE_FAKE_PROVIDER ?? 'target/release/fake-provider');

/** The dummy keys the published agents' entries name (the fake provider checks none). */
const DUMMY_KEYS = { ANTHROPIC_API_KEY: 'sk-ant-fake-0000', OPENAI_API_KEY: 'sk-fake-0000' };

/**
 * Whether the published agents are here: their folder, or null after the skip line (a failure
 * under RECOURSE_REQUIRE_AGENTS=1, as ./dev test sets it).
 */
export function publishedAgents(test) {
  const dir = process.env.RECOURSE_AGENTS_DIR;
  if (dir) return dir;
  assert.notEqual(process.env.RECOURSE_REQUIRE_AGENTS, '1', `${test}: RECOURSE_REQUIRE_AGENTS=1 but RECOURSE_AGENTS_DIR is not set`);
  console.log(`SKIPPED (no RECOURSE_AGENTS_DIR): ${test}`);
  return null;
}

/** The `[[agent]]` lines of a published agent pointed at `baseUrl`, its HOME prepared in `dir`. */
function publishedLines(dir, a, baseUrl) {
  const agents = process.env.RECOURSE_AGENTS_DIR;
  assert.ok(agents, 'a published agent needs RECOURSE_AGENTS_DIR');
  const home = join(dir, `home-${a.id}`);
  mkdirSync(home, { recursive: true });
  const setEnv = { HOME: home };
  let bin;
  let env;
  if (a.published === 'claude') {
    bin = 'claude-agent-acp';
    env = ['PATH', 'ANTHROPIC_API_KEY'];
    Object.assign(setEnv, {
      ANTHROPIC_BASE_URL: baseUrl,
      CLAUDE_CODE_MAX_RETRIES: '0',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    });
  } else if (a.published === 'codex') {
    bin = 'codex-acp';
    env = ['PATH', 'OPENAI_API_KEY'];
    mkdirSync(join(home, '.codex'), { recursive: true });
    writeFileSync(
      join(home, '.codex', 'config.toml'),
      [
        'model = "gpt-5.4-mini"',
        'model_provider = "fake"',
        'check_for_update_on_startup = false',
        '[model_providers.fake]',
        'name = "fake"',
        `base_url = ${quote(`${baseUrl}/v1`)}`,
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
        'request_max_retries = 0',
        'stream_max_retries = 0',
        '[analytics]',
        'enabled = false',
        '',
      ].join('\n'),
    );
  } else {
    throw new Error(`no published agent ${a.published} here`);
  }
  const lines = [`command = ${quote(join(agents, 'node_modules', '.bin', bin))}`, 'args = []'];
  lines.push(`env = [${env.map(quote).join(', ')}]`);
  return { lines, setEnv };
}

const quote = (s) => JSON.stringify(String(s)); // a TOML basic string

/**
 * The configuration file's text for `agents` (`{id, label?, provider_id?, script?}`) and `endpoints`
 * (`{id, label?, model, provider_id?}`); commands, roots, URLs and key names are filled in.
 */
function configText(dir, { agents = [], endpoints = [] }, provider = null) {
  const root = join(dir, 'work');
  mkdirSync(root, { recursive: true });
  const lines = [];
  for (const a of agents) {
    lines.push('[[agent]]', `id = ${quote(a.id)}`);
    if (a.label) lines.push(`label = ${quote(a.label)}`);
    let setEnv = null;
    if (a.published) {
      const p = publishedLines(dir, a, `${provider}/${a.id}`);
      lines.push(...p.lines);
      setEnv = p.setEnv;
    } else if (a.script) {
      const script = join(dir, `${a.id}-script.json`);
      writeFileSync(script, JSON.stringify({ attempts: a.script }));
      const args = ['--script', script, '--log', join(dir, `${a.id}-log.jsonl`)];
      lines.push(`command = ${quote(FAKE_AGENT)}`, `args = [${args.map(quote).join(', ')}]`);
    } else {
      lines.push(`command = ${quote(join(dir, 'bin', `${a.id}-acp`))}`);
    }
    lines.push(`allowed_roots = [${quote(root)}]`);
    if (a.provider_id) lines.push(`provider_id = ${quote(a.provider_id)}`);
    if (setEnv) {
      lines.push('[agent.set_env]', ...Object.entries(setEnv).map(([k, v]) => `${k} = ${quote(v)}`));
    }
    // Bounded waits for a real subprocess on a busy machine (a table: after the agent's keys).
    if (a.published) lines.push('[agent.timeouts]', 'step = 60', 'prompt_idle = 120', 'prompt_total = 300', 'exit_grace = 3');
    else if (a.script) lines.push('[agent.timeouts]', 'step = 20', 'prompt_idle = 30', 'prompt_total = 60', 'exit_grace = 2');
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
  const published = (config.agents ?? []).filter((a) => a.published);
  const provider = published.length ? await startProvider(dir, published) : null;
  writeFileSync(file, configText(dir, config, provider?.url));
  mkdirSync(ARTIFACTS, { recursive: true });
  const logPath = join(ARTIFACTS, `server-${name}.log`);
  let server;
  try {
    server = await startServer({
      bin: BIN,
      cwd: dir,
      logPath,
      extraArgs: ['--config', file],
      env: published.length ? DUMMY_KEYS : {},
    });
  } catch (err) {
    provider?.stop();
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
    /** What the fake provider received for agent `id` (its API calls, in order). */
    providerLog(id) {
      let lines = [];
      try {
        lines = readFileSync(join(dir, 'provider-log.jsonl'), 'utf8').split('\n').filter(Boolean);
      } catch {
        // nothing yet
      }
      return lines.map((l) => JSON.parse(l)).filter((r) => r.prefix === id && r.reply != null);
    },
    async reload(next) {
      const before = count('configuration reloaded');
      writeFileSync(file, configText(dir, next, provider?.url));
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
      provider?.stop();
      // A real agent may still be writing in its HOME (inside `dir`) as it ends: retry.
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    },
  };
}

/** Starts the `fake-provider` process with each published agent's `replies` under its id. */
async function startProvider(dir, agents) {
  const script = join(dir, 'provider-script.json');
  writeFileSync(script, JSON.stringify(Object.fromEntries(agents.map((a) => [a.id, a.replies ?? [{ text: 'Done.' }]]))));
  const child = spawn(FAKE_PROVIDER, ['--script', script, '--log', join(dir, 'provider-log.jsonl')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const first = await new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', ok);
    child.once('exit', (code) => fail(new Error(`fake-provider exited (${code}) before listening`)));
  });
  const { addr } = JSON.parse(first);
  // Closing its stdin ends it (it never outlives the test).
  return { url: `http://${addr}`, stop: () => child.stdin.end() };
}
