// The Worker in this process against a real server: exactly once, ACK/NACK/Dead, lease
// extension, max runtime, graceful stop, events, quantum, metrics.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Queue, Topic, Worker, Dead } from "../dist/index.js";
import { freePort, startServer, sleep, waitFor } from "./redis_servers.mjs";

let server;
let redis;

before(async () => {
  server = await startServer();
  redis = server.client();
});
after(() => server.stop());

/** Run `worker` until `done()` holds, then close it; resolves when run() has. */
async function runUntil(worker, done, timeoutMs = 60000) {
  const running = worker.run();
  try {
    await waitFor(done, timeoutMs, "the worker to finish its work");
  } finally {
    await worker.close();
    await running;
  }
}

test("10,000 messages by concurrency 8: each handled exactly once, nothing left", async () => {
  const topic = new Topic(redis, "once", 16);
  const bodies = Array.from({ length: 10000 }, (_, i) => `m${i}`);
  for (let i = 0; i < bodies.length; i += 1000) {
    assert.equal(await topic.push(bodies.slice(i, i + 1000), { delay: 0 }), 1000);
  }
  const seen = new Map();
  let running = 0;
  let most = 0;
  const w = new Worker(topic, async (msg) => {
    running++;
    most = Math.max(most, running);
    seen.set(msg.body.toString(), (seen.get(msg.body.toString()) ?? 0) + 1);
    assert.equal(msg.deliveries, 1);
    if (seen.size % 7 === 0) await sleep(1);
    running--;
  }, { concurrency: 8, leaseMs: 30000 });
  let completed = 0;
  w.on("completed", () => completed++);
  await runUntil(w, () => completed === 10000);
  assert.equal(seen.size, 10000);
  assert.ok([...seen.values()].every((n) => n === 1));
  assert.ok(most <= 8, `at most 8 handlers at once, saw ${most}`);
  assert.equal(w.stats.processed, 10000);
  assert.equal(w.stats.lost, 0);
  const info = await topic.info();
  assert.deepEqual([info.waiting, info.inflight, info.dead], [0, 0, 0]);
  if ("acked" in info) assert.equal(info.acked, 10000);   // per-queue counters: the v3 contract
});

test("throw → NACK with the queue's backoff, Dead → NACK DEAD, events", async () => {
  const q = new Queue(redis, "fail");
  await q.setPolicy({ retries: 5, backoffMs: 300 });
  await q.push(["flaky", "poison"], { delay: 0 });
  const tries = [];
  const w = new Worker(q, async (msg) => {
    tries.push([msg.body.toString(), msg.deliveries, Date.now()]);
    if (msg.body.toString() === "poison") throw new Dead("cannot be parsed");
    if (msg.deliveries < 3) throw new Error("try again");
    return "ok";
  }, { concurrency: 2, blockMs: 100 });
  const failed = [];
  const completed = [];
  w.on("failed", (msg, err) => failed.push([msg.body.toString(), err.message]));
  w.on("completed", (msg, result) => completed.push([msg.body.toString(), result]));
  await runUntil(w, () => completed.length === 1, 20000);
  assert.deepEqual(completed, [["flaky", "ok"]]);
  assert.deepEqual(failed.sort(), [["flaky", "try again"], ["flaky", "try again"], ["poison", "cannot be parsed"]]);
  const flaky = tries.filter(([b]) => b === "flaky");
  assert.deepEqual(flaky.map(([, d]) => d), [1, 2, 3]);
  assert.ok(flaky[1][2] - flaky[0][2] >= 250, "the first retry waits for backoff-ms (300)");
  assert.ok(flaky[2][2] - flaky[1][2] >= 500, "the second twice as long");
  assert.deepEqual(await redis.zrange("dead{fail}", 0, -1), ["poison"]);
  assert.deepEqual(w.stats, { processed: 1, failed: 2, dead: 1, extended: 0, timedOut: 0, released: 0, lost: 0 });
});

test("the lease is extended while a handler runs past it: delivered once", async () => {
  const q = new Queue(redis, "extend");
  await q.push(["slow"], { delay: 0 });
  const deadlines = [];
  let calls = 0;
  const w = new Worker(q, async () => {
    calls++;
    for (let i = 0; i < 8; i++) {
      await sleep(400);
      const [[, , deadline]] = await redis.call("RMQ.PENDING", "extend");
      deadlines.push(Number(deadline));
    }
  }, { concurrency: 1, leaseMs: 1000, blockMs: 100 });
  await runUntil(w, () => w.stats.processed === 1, 20000);
  assert.equal(calls, 1, "never delivered again while its handler ran (3.2 s on a 1 s lease)");
  assert.ok(w.stats.extended >= 3, `extended ${w.stats.extended} times`);
  assert.ok(deadlines.at(-1) - deadlines[0] >= 2000, "the deadline moved on");
  assert.deepEqual(await redis.call("RMQ.PENDING", "extend"), []);
  assert.equal((await q.info()).inflight, 0);
});

test("maxRuntimeMs: a handler past it is given up on (signal aborted), its message nacked", async () => {
  const q = new Queue(redis, "runtime");
  await q.push(["stuck"], { delay: 0 });
  let aborted = null;
  const w = new Worker(q, (msg) => new Promise((resolve) => {
    msg.signal.addEventListener("abort", () => { aborted = msg.signal.reason.message; resolve(); });
    if (msg.deliveries > 1) resolve();
  }), { concurrency: 1, maxRuntimeMs: 300, blockMs: 100 });
  const failed = [];
  w.on("failed", (msg, err) => failed.push(err.message));
  await runUntil(w, () => w.stats.processed === 1, 20000);
  assert.match(aborted, /maxRuntimeMs/);
  assert.equal(failed.length, 1);
  assert.equal(w.stats.timedOut, 1);
  assert.equal(w.stats.failed, 1);
});

test("graceful stop: running handlers finish, nothing is left in flight", async () => {
  const q = new Queue(redis, "grace");
  await q.push(Array.from({ length: 50 }, (_, i) => `g${i}`), { delay: 0 });
  let started = 0;
  let finished = 0;
  const w = new Worker(q, async () => {
    started++;
    await sleep(300);
    finished++;
  }, { concurrency: 4, blockMs: 200 });
  const running = w.run();
  await waitFor(() => started >= 4, 10000, "handlers to start");
  await w.close();
  await running;
  assert.equal(finished, started, "every handler that started finished");
  assert.equal(w.stats.processed, started);
  assert.equal(w.inFlight, 0);
  const info = await q.info();
  assert.equal(info.inflight, 0);
  assert.equal(info.waiting, 50 - started);
});

test("close() is the documented verb and stop() its alias: each ends run() and emits closed, then stopped", async () => {
  assert.equal(typeof Worker.prototype.close, "function");
  for (const verb of ["close", "stop"]) {
    const q = new Queue(redis, `verb-${verb}`);
    await q.push(["x"], { delay: 0 });
    const events = [];
    let handled = 0;
    const w = new Worker(q, () => { handled++; }, { concurrency: 1, blockMs: 100 });
    w.on("closed", () => events.push("closed"));
    w.on("stopped", () => events.push("stopped"));
    const running = w.run();
    await waitFor(() => handled === 1, 10000, "the message");
    await w[verb]();
    assert.deepEqual(events, ["closed", "stopped"], `${verb}() resolved after run() ended`);
    await running;
    assert.equal(w.inFlight, 0);
    assert.deepEqual(await w[verb](), undefined, `${verb}() again resolves at once`);
  }
  const never = new Worker(new Queue(redis, "verb-never"), () => {});
  await never.close();                  // a worker that never ran closes at once
});

test("graceful stop: a handler still running after graceMs has its message nacked back", async () => {
  const q = new Queue(redis, "grace2");
  await q.push(["hang"], { delay: 0 });
  let signal;
  const w = new Worker(q, (msg) => { signal = msg.signal; return new Promise(() => {}); },
    { concurrency: 1, graceMs: 200, blockMs: 100 });
  const running = w.run();
  await waitFor(() => signal, 10000, "the handler to start");
  await w.stop();
  await running;
  assert.equal(signal.aborted, true);
  assert.equal(w.stats.released, 1);
  const info = await q.info();
  assert.deepEqual([info.inflight, info.waiting, info.ready], [0, 1, 1], "due again at once");
});

test("a server without the module: run() rejects, saying the module is not loaded", async () => {
  const plain = await startServer({ module: false });
  try {
    const w = new Worker(new Topic(plain.client(), "t", 4), () => {}, { blockMs: 100 });
    await assert.rejects(w.run(), { name: "ModuleNotLoaded", message: /RMQ module is not loaded.*--loadmodule/ });
  } finally {
    await plain.stop();
  }
});

test("quantum is sent to RMQ.TPOP only when set", async () => {
  const topic = new Topic(redis, "quant", 4);
  const bodies = Array.from({ length: 40 }, (_, i) => `q${i}`);
  await topic.push(bodies, { delay: 0 });
  const seen = new Set();
  const w = new Worker(topic, (msg) => { seen.add(msg.body.toString()); }, { concurrency: 8, quantum: 4, blockMs: 100 });
  await runUntil(w, () => seen.size === 40, 20000);
  assert.throws(() => new Worker(new Queue(redis, "q"), () => {}, { quantum: 2 }), /Topic/);
});

test("unknown Worker options are refused, not silently ignored (as Python's Worker refuses them)", () => {
  const q = new Queue(redis, "opts");
  assert.throws(() => new Worker(q, () => {}, { concurency: 4 }),
    { name: "TypeError", message: /unknown Worker option concurency \(known: concurrency, / });
  assert.throws(() => new Worker(q, () => {}, { concurrency: 4, lease: 1000, block: 5 }),
    { name: "TypeError", message: /unknown Worker options lease, block/ });
  assert.throws(() => new Worker(q, () => {}, { handleSignals: "no" }), /handleSignals must be a boolean/);
  assert.throws(() => new Worker(q, () => {}, 4), /Worker options must be an object/);
});

test("bad options and misuse throw", async () => {
  const q = new Queue(redis, "opts");
  assert.throws(() => new Worker(q, () => {}, { concurrency: 0 }), RangeError);
  assert.throws(() => new Worker(q, () => {}, { leaseMs: 1.5 }), TypeError);
  assert.throws(() => new Worker(q, "nope"), /handler must be a function/);
  assert.throws(() => new Worker({}, () => {}), /Queue or a Topic/);
  const impatient = server.client({ commandTimeout: 500 });
  assert.throws(() => new Worker(new Queue(impatient, "opts"), () => {}, { blockMs: 1000 }), /commandTimeout/);
  const w = new Worker(q, () => {}, { blockMs: 100 });
  const running = w.run();
  await assert.rejects(w.run(), /runs once/);
  await w.stop();
  await running;
});

test("metricsPort serves the counters under the Python worker's metric names", async () => {
  const q = new Queue(redis, "metered");
  await q.push(["a", "b", "c"], { priority: 1 });
  const port = await freePort();
  const w = new Worker(q, () => {}, { concurrency: 2, blockMs: 100, metricsPort: port, name: "metered" });
  const running = w.run();
  await waitFor(() => w.stats.processed === 3, 30000, "3 messages");
  const res = await fetchText(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  for (const line of [
    "# TYPE rmq_worker_processed counter", 'rmq_worker_processed_total{worker="metered"} 3',
    'rmq_worker_failed_total{worker="metered"} 0', 'rmq_worker_timed_out_total{worker="metered"} 0',
    "# TYPE rmq_worker_in_flight gauge", 'rmq_worker_in_flight{worker="metered"} 0',
  ]) assert.ok(res.body.split("\n").includes(line), `${line} in\n${res.body}`);
  assert.equal((await fetchText(`http://127.0.0.1:${port}/other`)).status, 404);
  await w.stop();
  await running;
  await assert.rejects(fetchText(`http://127.0.0.1:${port}/metrics`), "the port is closed after run()");
});

test("a metrics port that is taken makes run() reject, leaving nothing running", async () => {
  const port = await freePort();
  const taken = http.createServer().listen(port);
  await new Promise((r) => taken.once("listening", r));
  try {
    const w = new Worker(new Queue(redis, "metered2"), () => {}, { blockMs: 100, metricsPort: port });
    await assert.rejects(w.run(), /EADDRINUSE/);
    assert.equal(w.inFlight, 0);
  } finally {
    taken.close();
  }
  assert.throws(() => new Worker(new Queue(redis, "m"), () => {}, { metricsPort: 0 }), RangeError);
  assert.throws(() => new Worker(new Queue(redis, "m"), () => {}, { name: 5 }), /name must be a string/);
});

/** GET `url`: {status, body}, rejecting when nothing listens. */
function fetchText(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => { body += c; });
      res.on("end", () => resolve({ status: res.statusCode, body }));
    }).on("error", reject);
  });
}
