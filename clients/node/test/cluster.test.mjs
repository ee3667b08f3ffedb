// A 3-primary Redis Cluster (one replica each): the worker runs TPOP on every primary, and a
// primary killed with kill -9 during consumption (its replica takes over) loses nothing.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Queue, Topic, Worker } from "../dist/index.js";
import { TestCluster, sleep, waitFor } from "./redis_servers.mjs";

let cluster;
let rc;

before(async () => {
  cluster = await new TestCluster(3, 1).start();
  rc = cluster.client({ redisOptions: { maxRetriesPerRequest: null } });
});
after(async () => {
  rc?.disconnect();
  await cluster?.stop();
});

/** Every primary has replicated all it has (WAIT), so a kill -9 loses no push. */
async function replicated() {
  await Promise.all(rc.nodes("master").map((n) => n.call("WAIT", 1, 5000)));
}

test("commands go straight to their queue's node; a topic spreads over the 3 primaries", async () => {
  const topic = new Topic(rc, "spread", 16);
  const owners = new Set(await Promise.all(topic.queues.map(async (q) => (await cluster.owner(q)).port)));
  assert.equal(owners.size, 3);
  const before = await movedCount();
  const msgs = Array.from({ length: 300 }, (_, i) => `s${i}`);
  assert.equal(await topic.push(msgs, { priority: 1 }), 300);
  assert.equal((await topic.info()).waiting, 300);
  assert.equal(await movedCount(), before, "no MOVED redirections");
  const seen = new Set();
  const w = new Worker(topic, (m) => { seen.add(m.body.toString()); }, { concurrency: 8, blockMs: 200 });
  const running = w.run();
  await waitFor(() => seen.size === 300, 20000, "every message");
  await w.stop();
  await running;
  const info = await topic.info();
  assert.deepEqual([info.waiting, info.inflight], [0, 0]);
});

async function movedCount() {
  let total = 0;
  for (const n of cluster.alive()) {
    const c = n.client();
    const stats = await c.info("errorstats");
    c.disconnect();
    total += Number(/errorstat_MOVED:count=(\d+)/.exec(stats)?.[1] ?? 0);
  }
  return total;
}

test("a primary killed (kill -9) during consumption: its replica takes over, nothing is lost", async () => {
  const topic = new Topic(rc, "fo", 16);
  const first = Array.from({ length: 3000 }, (_, i) => `a${i}`);
  const second = Array.from({ length: 500 }, (_, i) => `b${i}`);
  await topic.push(first, { priority: 1 });
  await replicated();
  const seen = new Map();
  let slow = false;
  const w = new Worker(topic, async (m) => {
    await sleep(slow ? 50 : 2);
    seen.set(m.body.toString(), (seen.get(m.body.toString()) ?? 0) + 1);
  }, { concurrency: 8, leaseMs: 3000, blockMs: 300 });
  const errors = [];
  w.on("error", (e) => errors.push(e.message));
  const running = w.run();
  try {
    await waitFor(() => seen.size >= 300, 30000, "consumption to be under way");
    slow = true;                                  // messages in flight at the kill
    const victim = await cluster.owner(topic.queues[0]);
    await victim.kill9();
    await waitFor(async () => (await cluster.owner(topic.queues[0])).port !== victim.port, 30000,
      "a replica to take over", 100);
    await cluster.waitOk(30000);
    slow = false;
    assert.ok(seen.size < first.length, "consumption had not ended before the kill");
    await topic.push(second, { priority: 1 });   // also onto the new primary
    const all = [...first, ...second];
    await waitFor(() => all.every((b) => seen.has(b)), 120000, "every message handled after the failover", 200);
  } finally {
    await w.stop();
    await running;
  }
  assert.ok(errors.length >= 1, "the lost primary was reported on `error`");
  const info = await topic.info();
  assert.deepEqual([info.waiting, info.inflight, info.dead], [0, 0, 0]);
  assert.ok(w.stats.processed >= first.length + second.length);
});

test("a Queue on a cluster: blocking POP through a duplicate Cluster client", async () => {
  const q = new Queue(rc, "single");
  const got = [];
  const w = new Worker(q, (m) => { got.push(m.body.toString()); }, { concurrency: 2, blockMs: 200 });
  const running = w.run();
  await sleep(300);
  await q.push(["x", "y"], { delay: 0 });
  await waitFor(() => got.length === 2, 10000, "both messages");
  await w.stop();
  await running;
  assert.deepEqual(got.sort(), ["x", "y"]);
});
