// Durable mode (issue #35): pushes and acks that resolve only once a replica holds them.
// A primary and a replica of this file's own; "the replica is down" is the replica stopped
// with SIGSTOP by the pid started here (connected, acknowledging nothing: as partitioned).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Queue, Topic, Worker, NotDurable } from "../dist/index.js";
import { Server, startServer, waitFor, whileStopped } from "./redis_servers.mjs";

const TIMEOUT_MS = 300;   // while the replica is down: how long each call waits
const UP = { replicas: 1, timeoutMs: 20000 };   // while it is up: generous, the machine is busy
const DOWN = { replicas: 1, timeoutMs: TIMEOUT_MS };
let primary;
let replica;
let pc;
let rc;

before(async () => {
  primary = await startServer({ conf: ["--repl-diskless-sync-delay", "0"] });
  replica = await new Server({ conf: ["--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", primary.port] }).start();
  pc = primary.client();
  rc = replica.client();
  await waitFor(async () => (await rc.info("replication")).includes("master_link_status:up"), 20000, "replica in sync");
});
after(async () => {
  await replica.stop();
  await primary.stop();
});

const withReplicaDown = (body) => whileStopped(replica, body);

test("a durable push is on the replica when it resolves", async () => {
  const q = new Queue(pc, "d:push", { durable: UP });
  assert.equal(await q.push(["a", "b"], { priority: 5 }), 2);
  assert.deepEqual(await rc.zrange("d:push", 0, -1, "WITHSCORES"), ["a", "5", "b", "5"]);
  assert.equal(await new Queue(pc, "d:push").push("a", { priority: 7, durable: UP }), 0);
  assert.equal(await rc.zscore("d:push", "a"), "7");
});

test("replica down: NotDurable, the push done on the primary; the retry merges", async () => {
  const q = new Queue(pc, "d:down", { durable: { replicas: 1, timeoutMs: TIMEOUT_MS } });
  await withReplicaDown(async () => {
    const start = Date.now();
    const err = await q.push("job-1", { priority: 3 }).then(() => null, (e) => e);
    assert.ok(err instanceof NotDurable, String(err));
    assert.ok(Date.now() - start >= TIMEOUT_MS * 0.9);
    assert.deepEqual([err.confirmed, err.wanted, err.replies], [0, 1, [1]]);
    assert.match(err.message, /0 of 1 replicas.*retry/);
    assert.equal(await pc.zscore("d:down", "job-1"), "3");
    // durable 0 for one call: not waited for
    assert.equal(await q.push("job-2", { priority: 3, durable: 0 }), 1);
  });
  assert.equal(await q.push("job-1", { priority: 3, durable: UP }), 0);
  assert.equal(await pc.zcard("d:down"), 2);
  assert.equal(await rc.zscore("d:down", "job-1"), "3");
});

test("a topic push waits after all its queues", async () => {
  const t = new Topic(pc, "d:topic", 4, { durable: UP });
  const msgs = Array.from({ length: 20 }, (_, i) => `m${i}`);
  assert.equal(await t.push(msgs, { priority: 1 }), 20);
  let onReplica = 0;
  for (const q of t.queues) onReplica += await rc.zcard(q);
  assert.equal(onReplica, 20);
});

test("durable ack: on the replica when it resolves; NotDurable when the replica is down", async () => {
  const q = new Queue(pc, "d:ack", { durable: UP });
  await q.push(["a", "b"], { priority: 1 });
  const [a, b] = (await q.pop({ count: 2, leaseMs: 60000 })).sort((x, y) => x.body.compare(y.body));
  assert.equal(await a.ack(), true);
  assert.equal(await rc.zscore("prepare{d:ack}", "a"), null);
  await withReplicaDown(async () => {
    const err = await b.ack({ durable: DOWN }).then(() => null, (e) => e);
    assert.ok(err instanceof NotDurable, String(err));
    assert.deepEqual(err.replies, [1]);
    assert.equal(await pc.zscore("prepare{d:ack}", "b"), null);
  });
});

test("durable pop: a primary without its replica hands out nothing", async () => {
  const q = new Queue(pc, "d:pop", { durable: UP });
  await q.push(["a", "b"], { priority: 1 });
  const [a] = await q.pop({ leaseMs: 60000 });
  assert.notEqual(await rc.zscore("prepare{d:pop}", a.body), null);
  await withReplicaDown(async () => {
    const err = await q.pop({ leaseMs: 60000, durable: DOWN }).then(() => null, (e) => e);
    assert.ok(err instanceof NotDurable, String(err));
    const other = a.body.toString() === "a" ? "b" : "a";
    assert.deepEqual(err.replies.map((r) => r.map(([m, d]) => [m.toString(), d])), [[[other, 1]]]);
    assert.match(err.message, /not handed out/);
    assert.equal(await pc.zcard("prepare{d:pop}"), 2);   // in flight there until the lease ends
    assert.deepEqual(await q.pop({ durable: 0 }), []);
    const t = new Topic(pc, "d:tpop", 2, { durable: DOWN });
    await assert.rejects(t.pop(), NotDurable);
  });
});

test("the worker acks durably", async () => {
  const q = new Queue(pc, "d:worker", { durable: UP });
  await q.push(Array.from({ length: 10 }, (_, i) => `w${i}`), { priority: 1 });
  const seen = [];
  const worker = new Worker(q, async (msg) => { seen.push(msg.body.toString()); }, { concurrency: 2, blockMs: 200 });
  const running = worker.run();
  await waitFor(async () => worker.stats.processed === 10, 20000, "10 processed");
  await worker.stop();
  await running;
  assert.equal(seen.length, 10);
  assert.equal(worker.stats.lost, 0);
  await waitFor(async () => (await rc.zcard("prepare{d:worker}")) === 0, 100, "replica acked");
});

test("bad durable values throw before anything is sent", async () => {
  for (const bad of [-1, 1.5, 1001, "1", true, { replicas: 0 }, { replicas: 1, timeoutMs: 0 },
    { replicas: 1, aof: 1 }, { replicas: 1, nope: 1 }]) {
    assert.throws(() => new Queue(pc, "d:bad", { durable: bad }), /durable/, JSON.stringify(bad));
    await assert.rejects(new Queue(pc, "d:bad").push("m", { priority: 1, durable: bad }), /durable/);
  }
  assert.equal(await pc.exists("d:bad"), 0);
});

test("aof: WAITAOF where the server has it, its own error where not", async () => {
  const version = (await pc.info("server")).match(/redis_version:(\d+)\.(\d+)/);
  const hasWaitaof = Number(version[1]) * 100 + Number(version[2]) >= 702;
  const q = new Queue(pc, "d:aof", { durable: { replicas: 1, aof: true } });
  // appendonly is off on these servers
  await assert.rejects(q.push("m", { priority: 1 }), hasWaitaof ? /appendonly/i : /unknown command/i);
});
