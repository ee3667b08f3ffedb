// Durable mode on a Redis Cluster (issue #35): a 3-primary cluster with a replica each. Each
// queue's commands and their WAIT go to the primary serving its slot, so a queue whose
// primary's replica is stopped (SIGSTOP by the pid started here: connected, acknowledging
// nothing) gets NotDurable while queues on the other primaries go on; a failover is followed.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { Queue, Topic, Worker, NotDurable } from "../dist/index.js";
import { keySlot } from "../dist/slot.js";
import { TestCluster, waitFor, whileStopped } from "./redis_servers.mjs";

const UP = { replicas: 1, timeoutMs: 20000 };   // generous: the machine is busy
const DOWN = { replicas: 1, timeoutMs: 300 };
let cluster;
let rc;

before(async () => {
  cluster = await new TestCluster(3, 1).start();
  rc = cluster.client();
});
after(async () => {
  rc?.disconnect();
  await cluster?.stop();
});

/** Queue names with the prefix whose slots are on 3 different primaries, with their owners. */
async function onEachPrimary(prefix) {
  const byOwner = new Map();
  for (let i = 0; byOwner.size < 3; i++) {
    const owner = await cluster.owner(`${prefix}${i}`);
    if (!byOwner.has(owner)) byOwner.set(owner, `${prefix}${i}`);
  }
  return [...byOwner].map(([owner, name]) => ({ owner, name }));
}

/** The replica of primary `node` (every node knows it once gossip has told them). */
async function replicaOf(node) {
  return (await waitFor(async () => (await cluster.replicasOf(node))[0], 20000, "the primary to know its replica", 50));
}

/** A client of `node` that reads its keys even when it is a replica. */
async function reader(node) {
  const c = node.client();
  await c.call("READONLY");
  return c;
}

test("the hash slot of a key is the server's", async () => {
  const c = cluster.nodes[0].client();
  const keys = ["q", "prepare{q}", "{}x", "a{}{b}", "x{y}z{w}", "{", "}{a}", "é", "\u0000bin", "queue:42"];
  for (const k of keys) assert.equal(keySlot(Buffer.from(k)), await c.cluster("KEYSLOT", k), k);
});

test("durable push, pop and ack: on the owning primary's replica when they resolve", async () => {
  for (const { owner, name } of await onEachPrimary("dc:")) {
    const replica = await replicaOf(owner);
    const r = await reader(replica);
    const q = new Queue(rc, name, { durable: UP });
    assert.equal(await q.push(["a", "b"], { priority: 5 }), 2);
    assert.deepEqual(await r.zrange(name, 0, -1, "WITHSCORES"), ["a", "5", "b", "5"], name);
    const [m] = await q.pop({ leaseMs: 60000 });
    assert.equal(await r.zcard(`prepare{${name}}`), 1, name);
    assert.equal(await m.ack(), true);
    assert.equal(await r.zcard(`prepare{${name}}`), 0, name);
    assert.equal(await r.zcard(name), 1, name);
  }
});

test("a topic push over the 3 primaries waits on each", async () => {
  const t = new Topic(rc, "dct", 16, { durable: UP });
  const msgs = Array.from({ length: 60 }, (_, i) => `m${i}`);
  assert.equal(await t.push(msgs, { priority: 1 }), 60);
  let onReplicas = 0;
  for (const q of t.queues) {
    const replica = await replicaOf(await cluster.owner(q));
    onReplicas += await (await reader(replica)).zcard(q);
  }
  assert.equal(onReplicas, 60);
});

test("one primary's replica stopped: NotDurable on its queues only; fine once it is back", async () => {
  const [down, other] = await onEachPrimary("dd:");
  const replica = await replicaOf(down.owner);
  const slow = new Queue(rc, down.name, { durable: DOWN });
  const fine = new Queue(rc, other.name, { durable: DOWN });
  await fine.push("warm", { priority: 1 });    // the cluster's connections are open
  await whileStopped(replica, async () => {
    const err = await slow.push("job", { priority: 3 }).then(() => null, (e) => e);
    assert.ok(err instanceof NotDurable, String(err));
    assert.deepEqual([err.confirmed, err.wanted, err.replies], [0, 1, [1]]);
    assert.equal(await down.owner.client().zscore(down.name, "job"), "3");   // done on the primary
    assert.equal(await fine.push("job", { priority: 3 }), 1);
    // a topic push over every primary: that node's WAIT fails it, all of it done
    const t = new Topic(rc, "ddt", 16, { durable: DOWN });
    const all = await t.push(Array.from({ length: 40 }, (_, i) => `t${i}`), { priority: 1 }).then(() => null, (e) => e);
    assert.ok(all instanceof NotDurable, String(all));
    assert.equal(all.replies.reduce((a, r) => a + r, 0), 40);
    assert.equal((await t.info()).waiting, 40);
  });
  // SIGCONT: the replica catches up; generous, it may have been marked failing meanwhile
  assert.equal(await slow.push("job", { priority: 3, durable: UP }), 0);
  const r = await reader(replica);
  assert.equal(await r.zscore(down.name, "job"), "3");
});

test("after a failover the queue's commands follow its new primary", async () => {
  const [{ owner, name }] = await onEachPrimary("df:");
  // no periodic refresh: the slot map stays stale until a MOVED
  const stale = cluster.client({ slotsRefreshInterval: 0 });
  const q = new Queue(stale, name, { durable: UP });
  await q.push(["before-1", "before-2"], { priority: 1 });
  const [taken] = await q.pop({ leaseMs: 120000 });
  const replica = await replicaOf(owner);
  const rr = replica.client();
  for (let deadline = Date.now() + 60000; (await rr.info("replication")).includes("role:slave");) {
    assert.ok(Date.now() < deadline, "the replica did not take over in 60 s");
    await rr.cluster("FAILOVER");
    await waitFor(async () => !(await rr.info("replication")).includes("role:slave"), 10000, "promotion")
      .catch(() => {});
  }
  await cluster.waitOk(30000);
  const slot = keySlot(Buffer.from(name));
  assert.equal(stale.slots[slot][0], `127.0.0.1:${owner.port}`);
  const moved = async () => Number(/errorstat_MOVED:count=(\d+)/.exec(await owner.client().info("errorstats"))?.[1] ?? 0);
  const movedBefore = await moved();
  // the old primary, now a replica, answers MOVED; the push follows it
  assert.equal(await q.push("after", { priority: 1 }), 1);
  assert.ok(await moved() > movedBefore);
  assert.equal(stale.slots[slot][0], `127.0.0.1:${replica.port}`);
  assert.equal(await taken.ack(), true);
  const [next] = await q.pop({ leaseMs: 60000 });
  assert.equal(await next.ack(), true);
  const oldPrimary = await reader(owner);   // now the new primary's replica
  assert.equal(await oldPrimary.zcard(name), 1);
  assert.equal(await oldPrimary.zcard(`prepare{${name}}`), 0);
  assert.equal((await cluster.owner(name)).port, replica.port);
  stale.disconnect();
});

test("a slot map naming no known primary, or the wrong one: read again; raised when it stays so", async () => {
  const c = cluster.client();
  const q = new Queue(c, "dsm", { durable: UP });
  const owner = await cluster.owner("dsm");
  assert.equal(await q.push("a", { priority: 1 }), 1);   // connected, slot map read
  const slot = keySlot(Buffer.from("dsm"));
  c.slots[slot] = ["127.0.0.1:1"];
  assert.equal(await q.push("b", { priority: 1 }), 1);
  assert.notEqual(c.slots[slot][0], "127.0.0.1:1");
  c.slots[slot] = ["127.0.0.1:1"];
  c.refreshSlotsCache = (done) => done();                // as if no node answered
  await assert.rejects(q.push("c", { priority: 1 }), /no known primary serves the slot of dsm; retry/);
  // a map naming another primary: MOVED each time, raised after the attempts
  const other = c.nodes("master").map((n) => `${n.options.host}:${n.options.port}`)
    .find((k) => k !== `127.0.0.1:${owner.port}`);
  c.slots[slot] = [other];
  await assert.rejects(q.push("c", { priority: 1 }), { message: new RegExp(`^MOVED ${slot} 127.0.0.1:${owner.port}$`) });
  assert.equal(await owner.client().zscore("dsm", "c"), null);
  c.disconnect();
});

test("a durable TPOP on a Cluster client needs a primary's connection", async () => {
  const t = new Topic(rc, "dtp", 4, { durable: UP });
  await assert.rejects(t.pop(), /needs a primary's connection/);
  const primary = new Redis({ port: (await cluster.owner("dtp_0")).port, host: "127.0.0.1" });
  try {
    await t.push("m", { basis: "x", priority: 1, durable: 0 });
    assert.ok(Array.isArray(await t.pop({}, primary)));
  } finally { primary.disconnect(); }
});

test("the Worker on a durable topic: pops on each primary, acks on the queues' primaries", async () => {
  const t = new Topic(rc, "dcw", 16, { durable: UP });
  const msgs = Array.from({ length: 90 }, (_, i) => `w${i}`);
  await t.push(msgs, { priority: 1 });
  const seen = new Set();
  const worker = new Worker(t, (m) => { seen.add(m.body.toString()); }, { concurrency: 4, blockMs: 200 });
  const errors = [];
  worker.on("error", (e) => errors.push(e.message));
  const running = worker.run();
  await waitFor(() => worker.stats.processed === 90, 60000, "90 processed");
  await worker.stop();
  await running;
  assert.deepEqual([seen.size, worker.stats.lost, errors], [90, 0, []]);
  for (const q of t.queues) {
    const replica = await replicaOf(await cluster.owner(q));
    assert.equal(await (await reader(replica)).zcard(`prepare{${q}}`), 0, q);
  }
});

// Last: it leaves the cluster with a primary gone.
test("a primary killed (kill -9): its promoted replica has no replica, so nothing is confirmed", async () => {
  const [{ owner, name }] = await onEachPrimary("dk:");
  const q = new Queue(rc, name, { durable: DOWN });
  assert.equal(await q.push("before", { priority: 1, durable: UP }), 1);
  const replica = await replicaOf(owner);
  await owner.kill9();
  await waitFor(async () => (await cluster.owner(name)).port === replica.port, 60000, "the replica to take over", 100);
  const outcomes = [];
  for (let deadline = Date.now() + 60000; ;) {
    // a lost connection or CLUSTERDOWN first, then NotDurable: never a confirmation
    const r = await q.push("after", { priority: 1 }).then(() => "confirmed", (e) => e);
    outcomes.push(r instanceof Error ? r.name : r);
    if (r instanceof NotDurable || r === "confirmed" || Date.now() > deadline) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(outcomes.at(-1), "NotDurable", outcomes.join(", "));
  assert.ok(!outcomes.includes("confirmed"));
  const pc = replica.client();
  assert.deepEqual(await pc.zrange(name, 0, -1), ["after", "before"]);
});
