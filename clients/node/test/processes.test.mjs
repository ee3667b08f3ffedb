// Worker processes against one server: a worker killed mid-message (its message comes back
// after the lease), 4 workers never handling one group twice at once, SIGTERM stops
// gracefully, a server restart is survived.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { Queue, Topic, Worker } from "../dist/index.js";
import { startServer, Server, sleep, waitFor } from "./redis_servers.mjs";

const PROC = path.join(path.dirname(fileURLToPath(import.meta.url)), "worker_proc.mjs");
let server;
let redis;
const children = new Set();

before(async () => {
  server = await startServer();
  redis = server.client();
});
after(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");   // by pid, ours
  await server.stop();
});

/** Start a worker process; `lines` collects its stdout lines. */
function workerProcess(cfg) {
  const child = spawn(process.execPath, [PROC, JSON.stringify({ port: server.port, ...cfg })],
    { stdio: ["ignore", "pipe", "inherit"] });
  children.add(child);
  child.lines = [];
  let buf = "";
  child.stdout.on("data", (d) => {
    buf += d;
    const parts = buf.split("\n");
    buf = parts.pop();
    child.lines.push(...parts);
  });
  child.exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
  return child;
}

test("a worker process killed mid-message: redelivered after the lease, not before", async () => {
  const topic = new Topic(redis, "killed", 4);
  await topic.push(["job-1"], { delay: 0 });
  const child = workerProcess({ topic: "killed", slots: 4, concurrency: 2, leaseMs: 1500, handler: "hang" });
  await waitFor(() => child.lines.includes("started job-1"), 15000, "the worker to start the message");
  await sleep(1200);                    // the worker extends the lease meanwhile
  child.kill("SIGKILL");
  await child.exited;
  const q = topic.queueFor("job-1");
  const [[body, deliveries, deadline]] = await redis.call("RMQ.PENDING", q);
  assert.deepEqual([body, deliveries], ["job-1", 1]);
  const got = [];
  const w = new Worker(topic, async (msg) => {
    const [sec, usec] = await redis.time();
    got.push([msg.body.toString(), msg.deliveries, Number(sec) * 1000 + Math.floor(Number(usec) / 1000)]);
  }, { concurrency: 2, blockMs: 100 });
  const running = w.run();
  await waitFor(() => got.length === 1, 15000, "the redelivery");
  await w.stop();
  await running;
  assert.equal(got[0][0], "job-1");
  assert.equal(got[0][1], 2, "its second delivery");
  assert.ok(got[0][2] >= Number(deadline), "not before the lease ran out");
  const info = await topic.info();
  assert.deepEqual([info.waiting, info.inflight], [0, 0]);
});

test("4 worker processes never run two handlers on one group at once", async () => {
  const topic = new Topic(redis, "groups", 8);
  const groups = 12;
  const per = 15;
  let pushed = 0;
  for (let g = 0; g < groups; g++) {
    for (let i = 0; i < per; i++) {   // highest priority first: the group's order is i
      pushed += await topic.push([`grp${g}:${i}`], { priority: per - i, group: `grp${g}` });
    }
  }
  assert.equal(pushed, groups * per);
  const procs = Array.from({ length: 4 }, () =>
    workerProcess({ topic: "groups", slots: 8, concurrency: 4, leaseMs: 10000, handler: "lock", holdMs: 15 }));
  await waitFor(async () => (await redis.llen("done")) === groups * per, 60000, "every message handled", 100);
  for (const p of procs) p.kill("SIGTERM");
  const exits = await Promise.all(procs.map((p) => p.exited));
  assert.deepEqual(exits.map((e) => e.code), [0, 0, 0, 0], "SIGTERM: a graceful stop, exit 0");
  assert.ok(procs.every((p) => p.lines.some((l) => l.startsWith("stopped "))));
  assert.equal(await redis.get("overlaps"), null, "no group was handled twice at once");
  const done = await redis.lrange("done", 0, -1);
  assert.equal(new Set(done).size, groups * per, "each message once");
  // and each group in its push order (one delivery of a group at a time, in queue order)
  for (let g = 0; g < groups; g++) {
    const order = done.filter((b) => b.startsWith(`grp${g}:`)).map((b) => Number(b.split(":")[1]));
    assert.deepEqual(order, [...order].sort((a, b) => a - b), `group ${g} in order`);
  }
  const info = await topic.info();
  assert.deepEqual([info.waiting, info.inflight], [0, 0]);
});

test("a server restart: the worker reconnects (with backoff) and goes on", async () => {
  const other = await startServer();
  const port = other.port;
  try {
    const c = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: null });
    c.on("error", () => {});
    const q = new Queue(c, "restart");
    const seen = new Set();
    const w = new Worker(q, (msg) => { seen.add(msg.body.toString()); }, { concurrency: 4, blockMs: 200 });
    const errors = [];
    w.on("error", (e) => errors.push(e.message));
    const running = w.run();
    await q.push(["before"], { delay: 0 });
    await waitFor(() => seen.has("before"), 10000, "the first message");
    await other.stop();
    await sleep(500);
    const again = new Server({ port });
    await again.start();
    try {
      await q.push(["after"], { delay: 0 });
      await waitFor(() => seen.has("after"), 20000, "a message after the restart");
      assert.ok(errors.length >= 1, "the outage was reported on `error`");
      await w.stop();
      await running;
    } finally {
      c.disconnect();
      await again.stop();
    }
  } finally {
    await other.stop();
  }
});
