// Test-only, for the published agents (server/tests/common/agents.rs, `Published::toml`):
// loaded into an agent's Node process with `--require` (NODE_OPTIONS), it makes every timer of
// a second or more fire RECOURSE_TIMER_SCALE times sooner. This is the agent's clock, injected
// as the tests inject Recourse's: Qwen Code retries a 429 or 5xx in a loop no setting reaches
// (7 requests, 1.5 s doubling to 30 s apart: about 80 s of waiting); under a scale of 20 the
// same 7 requests go out in about 4 s. Timers under a second (I/O, polling) keep their delay,
// and `Date` is not touched, so what the agent sends, and when it gives up, are its own.
'use strict';

const scale = Number(process.env.RECOURSE_TIMER_SCALE);
if (Number.isFinite(scale) && scale > 1) {
  const timers = require('node:timers');
  const promises = require('node:timers/promises');
  const { promisify } = require('node:util');
  const shorten = (ms) => (typeof ms === 'number' && ms >= 1000 ? ms / scale : ms);

  const original = timers.setTimeout;
  const setTimeout = function setTimeout(callback, ms, ...args) {
    return original(callback, shorten(ms), ...args);
  };
  setTimeout[promisify.custom] = (ms, ...rest) => original[promisify.custom](shorten(ms), ...rest);
  globalThis.setTimeout = setTimeout;
  timers.setTimeout = setTimeout;

  const originalPromise = promises.setTimeout;
  promises.setTimeout = (ms, ...rest) => originalPromise(shorten(ms), ...rest);
  // ES modules that import these from `node:timers` or `node:timers/promises` see them too.
  require('node:module').syncBuiltinESMExports();
}
