// Helpers for testing what the live pages do when the event stream has a gap: events the page
// never heard (the server drops events for a client that fell behind and then sends `lagged`),
// and a stream that drops and reconnects.

/**
 * An init script (runs before the app's scripts): every EventSource the page opens can be made
 * deaf to route events, as a server that drops them for a lagging client would be, and can be
 * handed the server's `lagged` notice. The page's own listeners see exactly what the browser
 * would deliver; nothing else about the stream changes.
 *
 * In the page: `__live.deaf = true` drops route events (`__live.dropped` keeps their data), and
 * `__live.lagged(n)` delivers `event: lagged` with data `n` on every open stream (answering how
 * many got it). `__live.missed(routeId, state)` says whether a dropped event moved that route to
 * that state, so a test knows the change it made was really kept from the page.
 */
export function controllableEventSource() {
  const Native = window.EventSource;
  const ROUTE_EVENTS = ['message', 'route'];
  const live = { sources: [], deaf: false, dropped: [] };
  // The filtering listener given to the browser for each (type, page listener).
  const wrapped = new Map(ROUTE_EVENTS.map((type) => [type, new WeakMap()]));
  class Controlled extends Native {
    constructor(...args) {
      super(...args);
      live.sources.push(this);
    }
    addEventListener(type, listener, options) {
      if (!ROUTE_EVENTS.includes(type) || typeof listener !== 'function') {
        return super.addEventListener(type, listener, options);
      }
      const filtered = function (event) {
        if (live.deaf) {
          live.dropped.push(event.data);
          return undefined;
        }
        return listener.call(this, event);
      };
      wrapped.get(type).set(listener, filtered);
      return super.addEventListener(type, filtered, options);
    }
    removeEventListener(type, listener, options) {
      const filtered = wrapped.get(type)?.get(listener);
      return super.removeEventListener(type, filtered ?? listener, options);
    }
  }
  live.missed = (routeId, state) =>
    live.dropped.some((data) => {
      try {
        const e = JSON.parse(data);
        return (e.route_id ?? e.snapshot?.route_id) === routeId && e.to === state;
      } catch {
        return false;
      }
    });
  live.lagged = (missed) => {
    let delivered = 0;
    for (const source of live.sources) {
      if (source.readyState !== Native.OPEN) continue;
      source.dispatchEvent(new MessageEvent('lagged', { data: String(missed) }));
      delivered += 1;
    }
    return delivered;
  };
  window.EventSource = Controlled;
  window.__live = live;
}

/**
 * Holds the page's requests to the server function whose URL matches `pattern` while `hold()`
 * is in force, so a test can look at the page between a reload's start and its answer.
 * `release()` lets the held ones (and later ones) through; `held()` is how many wait.
 */
export async function holdable(page, pattern) {
  let gate = null;
  let open = () => {};
  let waiting = 0;
  await page.route(pattern, async (route) => {
    if (gate) {
      waiting += 1;
      await gate;
      waiting -= 1;
    }
    await route.continue();
  });
  return {
    hold() {
      gate = new Promise((ok) => {
        open = ok;
      });
    },
    release() {
      gate = null;
      open();
    },
    held: () => waiting,
  };
}

/**
 * Counts the page's requests whose URL contains `part` that have not finished;
 * `idle()` resolves once none is in flight.
 */
export function inFlight(page, part) {
  const pending = new Set();
  page.on('request', (r) => {
    if (r.url().includes(part)) pending.add(r);
  });
  const done = (r) => pending.delete(r);
  page.on('requestfinished', done);
  page.on('requestfailed', done);
  return {
    count: () => pending.size,
    async idle(timeoutMs = 10000) {
      const until = Date.now() + timeoutMs;
      while (pending.size > 0) {
        if (Date.now() > until) throw new Error(`${pending.size} request(s) to ${part} still in flight`);
        await new Promise((ok) => setTimeout(ok, 20));
      }
    },
  };
}
