// Runs the browser tests against real `recourse serve` processes: each worker has a server of
// its own (a free port, a temporary database), and every server is stopped afterwards whatever
// happens (test failure, crash, Ctrl-C).
//
// Usage: node end2end/run.mjs [test files...]   (every file in end2end/tests/ when none is named;
// expects `cargo leptos build --release --precompress --split` to have run)
// Env: RECOURSE_BIN (default target/release/recourse; `./dev test` names its debug build with
// the UI embedded, `--features server/embed-ui`). The binary carries its UI. The tests get
// RECOURSE_URL (their worker's server: no configuration file), RECOURSE_ARTIFACTS and
// RECOURSE_BIN; RECOURSE_FAKE_AGENT (default target/release/fake-acp-agent) is the scripted ACP
// agent. RECOURSE_E2E_WORKERS: how many files run at once (default 2), each worker one file at
// a time against its own server.
//
// Why workers: one file at a time left part of a 2-core machine idle while a test waited (a
// page's requests, a live event, a route's timer): 19% idle over the suite alone. In CI's
// last step, beside the conformance check, two at a time took the suite from 162-167 s to
// 142-150 s; it is Chromium's CPU that bounds it after that. The contention of two workers is
// also what once showed that a page's readiness (`data-hydrated`) came before its own code had
// hydrated it (fixed; `hydration.test.mjs` holds it). Files never share a server with
// a file running at the same time; a file still finds whatever the files its worker ran before
// it left, as when every file ran on one server. Each file's output is printed whole when it
// ends, so the log reads file by file.

import { spawn } from 'node:child_process';
import { mkdirSync, existsSync, readdirSync } from 'node:fs';
import { join, resolve, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './lib/server.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bin = resolve(root, process.env.RECOURSE_BIN ?? 'target/release/recourse');
const artifacts = join(root, 'end2end', 'artifacts');

if (!existsSync(bin)) {
  console.error(`end2end: missing server binary at ${bin}; run \`cargo leptos build --release --precompress --split\` first`);
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const workersWanted = Number(process.env.RECOURSE_E2E_WORKERS ?? 2);
if (!Number.isInteger(workersWanted) || workersWanted < 1 || workersWanted > 16) {
  console.error('end2end: RECOURSE_E2E_WORKERS must be a whole number from 1 to 16');
  process.exit(2);
}

const named = process.argv.slice(2).map((f) => resolve(f));
const files = named.length
  ? named
  : readdirSync(join(root, 'end2end', 'tests'))
      .filter((f) => f.endsWith('.test.mjs'))
      .sort()
      .map((f) => join(root, 'end2end', 'tests', f));

const servers = [];
const running = new Set();
let stopping = false;
const cleanup = async () => {
  stopping = true;
  for (const child of running) if (child.exitCode === null) child.kill('SIGTERM');
  await Promise.all(servers.map((s) => s.close()));
};
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    await cleanup();
    process.exit(130);
  });
}

/** Runs one test file against `server`; resolves with its exit code, output and counts. */
function runFile(file, server) {
  return new Promise((ok) => {
    const started = Date.now();
    // A test still running after five minutes fails, named (the longest takes about 10 s): a
    // hang must not hold CI until its limit and say nothing.
    const child = spawn(process.execPath, ['--test', '--test-reporter=tap', '--test-timeout=300000', file], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        RECOURSE_URL: server.url,
        RECOURSE_ARTIFACTS: artifacts,
        // How the tests authenticate: scripts send the administrator's token, pages carry its
        // session cookie (see end2end/lib/server.mjs).
        RECOURSE_TOKEN: server.token,
        RECOURSE_SESSION: server.cookie,
        RECOURSE_DATABASE: server.db,
        RECOURSE_BIN: bin,
      },
    });
    running.add(child);
    const out = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => out.push(d));
    child.on('close', (code, signal) => {
      running.delete(child);
      const text = Buffer.concat(out).toString();
      const count = (what) => Number(text.match(new RegExp(`^# ${what} (\\d+)$`, 'm'))?.[1] ?? 0);
      ok({
        code: code ?? (signal ? 1 : 0),
        text,
        seconds: (Date.now() - started) / 1000,
        tests: count('tests'),
        pass: count('pass'),
        fail: count('fail') + count('cancelled'),
      });
    });
  });
}

let code = 0;
const started = Date.now();
try {
  const workers = Math.min(workersWanted, files.length);
  // One after the other: two servers asking for a free port at once could be given the same.
  for (let i = 0; i < workers; i++) {
    const logName = i === 0 ? 'server.log' : `server-${i + 1}.log`;
    const server = await startServer({ bin, cwd: root, logPath: join(artifacts, logName) });
    servers.push(server);
    console.log(`end2end: worker ${i + 1}'s recourse serve is up at ${server.url} (log: end2end/artifacts/${logName})`);
  }
  const queue = [...files];
  const totals = { files: 0, tests: 0, pass: 0, fail: 0, failed: [] };
  await Promise.all(
    servers.map(async (server, i) => {
      for (let file = queue.shift(); file && !stopping; file = queue.shift()) {
        const r = await runFile(file, server);
        const name = relative(root, file);
        console.log(`\nend2end: ${name} (worker ${i + 1}, ${r.seconds.toFixed(1)} s, exit ${r.code})`);
        process.stdout.write(r.text);
        totals.files += 1;
        totals.tests += r.tests;
        totals.pass += r.pass;
        totals.fail += r.fail;
        // A file can fail without a failing test (it did not load, or a hook threw).
        if (r.code !== 0 || r.fail > 0) totals.failed.push(name);
      }
    }),
  );
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `\nend2end: ${totals.files} files, ${totals.tests} tests: ${totals.pass} passed, ${totals.fail} failed, in ${seconds} s on ${workers} worker(s)`,
  );
  if (totals.failed.length) {
    console.log(`end2end: failed: ${totals.failed.join(', ')}`);
    code = 1;
  }
} catch (err) {
  console.error(`end2end: ${err.message}`);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
