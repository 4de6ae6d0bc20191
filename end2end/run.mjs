// Runs the browser tests against a real `recourse serve`: a free port, a temporary database,
// and the server stopped afterwards whatever happens (test failure, crash, Ctrl-C).
//
// Usage: node end2end/run.mjs [test files...]   (every file in end2end/tests/ when none is named;
// expects `cargo leptos build --release --precompress --split` to have run)
// Env: RECOURSE_BIN (default target/release/recourse; `./dev test` names its debug build with
// the UI embedded, `--features server/embed-ui`). The binary carries its UI. The tests get
// RECOURSE_URL (this server: no configuration file), RECOURSE_ARTIFACTS and RECOURSE_BIN;
// RECOURSE_FAKE_AGENT (default target/release/fake-acp-agent) is the scripted ACP agent.

import { spawn } from 'node:child_process';
import { mkdirSync, existsSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
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

let server = null;
let tests = null;
const cleanup = async () => {
  if (tests && tests.exitCode === null) tests.kill('SIGTERM');
  await server?.close();
};
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    await cleanup();
    process.exit(130);
  });
}

let code = 1;
try {
  server = await startServer({ bin, cwd: root, logPath: join(artifacts, 'server.log') });
  console.log(`end2end: recourse serve is up at ${server.url} (log: end2end/artifacts/server.log)`);
  const named = process.argv.slice(2).map((f) => resolve(f));
  const files = named.length ? named : [join(root, 'end2end', 'tests')];
  // A test still running after five minutes fails, named (the longest takes about 10 s): a
  // hang must not hold CI until its limit and say nothing.
  tests = spawn(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=300000', ...files], {
    cwd: root,
    stdio: 'inherit',
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
  code = await new Promise((ok) => tests.on('exit', (c, s) => ok(c ?? (s ? 1 : 0))));
} catch (err) {
  console.error(`end2end: ${err.message}`);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
