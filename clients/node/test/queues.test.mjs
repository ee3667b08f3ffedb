// Queue and Topic against a real server: routing, pushes, pops, binary bodies, policies,
// pause/resume and schedules.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Queue, Topic, route, AlreadySettled } from "../dist/index.js";
import { startServer, sleep } from "./redis_servers.mjs";

let server;
let redis;

before(async () => {
  server = await startServer();
  redis = server.client();
});
after(() => server.stop());

test("queueFor computes RMQ.ROUTE locally (the contract test vectors, and the server agrees)", async () => {
  const vectors = [["hello", 8, "_6"], ["item:42", 16, "_13"], ["order-1001", 1024, "_569"], ["", 4, "_0"]];
  for (const [basis, slots, suffix] of vectors) {
    assert.equal(route("t", slots, basis), `t${suffix}`);
    assert.equal(new Topic(redis, "t", slots).queueFor(basis), `t${suffix}`);
    assert.equal(await redis.call("RMQ.ROUTE", "t", slots, basis), `t${suffix}`);
  }
  const bytes = Buffer.from([0, 255, 128, 7, 13, 10]);
  assert.equal(route("b", 16384, bytes), await redis.call("RMQ.ROUTE", "b", 16384, bytes));
});

test("messages spelt like options arrive as messages (every push ends its options with MESSAGES)", async () => {
  const q = new Queue(redis, "spelt");
  assert.equal(await q.push(["GROUP", "x", "y", "MESSAGES", "dedup"], { priority: 1 }), 5);
  assert.deepEqual((await redis.zrange("spelt", 0, -1)).sort(), ["GROUP", "MESSAGES", "dedup", "x", "y"]);
  const g = new Queue(redis, "spelt-g");
  assert.equal(await g.push(["MESSAGES", "group", "SEQUENCE"], { priority: 1, group: "g" }), 3);
  const [taken] = await g.pop();
  assert.equal(String(taken.body), "MESSAGES", "the group's first message, no option swallowed");
  await g.schedule("s", "MESSAGES", { every: 3_600_000, priority: 1, group: "GROUP" });
  const [entry] = await g.schedules();
  assert.equal(entry.spec, "EVERY 3600000 PRIORITY 1 GROUP GROUP MESSAGES MESSAGES");
});

test("bad arguments throw before anything is sent", async () => {
  const q = new Queue(redis, "bad");
  assert.throws(() => new Queue(redis, "a{b}"), TypeError);
  assert.throws(() => new Topic(redis, "t", 3), RangeError);
  await assert.rejects(q.push(["x"], {}), /exactly one/);
  await assert.rejects(q.push(["x"], { delay: 1, priority: 2 }), /exactly one/);
  await assert.rejects(q.push([""], { delay: 0 }), /empty/);
  await assert.rejects(q.push([], { delay: 0 }), /at least one/);
  await assert.rejects(q.push(["x"], { at: 1000 }), RangeError);
  await assert.rejects(q.push(["x"], { delay: 0, group: "" }), RangeError);
  await assert.rejects(q.setPolicy({ retries: -1 }), RangeError);
  await assert.rejects(q.setPolicy({ nope: 1 }), /unknown policy field/);
  assert.equal(await redis.exists("bad"), 0);
});

test("a push without options throws the no-mode TypeError before anything is sent", async () => {
  // It was "Cannot read properties of undefined (reading 'range')".
  const q = new Queue(redis, "opts-q");
  const t = new Topic(redis, "opts-t", 4);
  await assert.rejects(q.push(["a"]), { name: "TypeError", message: /^a push needs exactly one of range, priority, at, delay \(got none\)$/ });
  await assert.rejects(t.push(["a"]), { name: "TypeError", message: /^a push needs exactly one of range, priority, at, delay \(got none\)$/ });
  await assert.rejects(q.push(["a"], null), { name: "TypeError", message: /push options must be an object, got null/ });
  assert.equal(await redis.exists("opts-q", "opts-t_0", "opts-t_1", "opts-t_2", "opts-t_3"), 0);
});

test("a schedule without a mode names only the modes a schedule takes (not at)", async () => {
  const q = new Queue(redis, "opts-s");
  const t = new Topic(redis, "opts-st", 4);
  await assert.rejects(q.schedule("s", "m", { every: 1000 }), { name: "TypeError", message: /^a schedule needs exactly one of range, priority, delay \(got none\)$/ });
  await assert.rejects(t.schedule("s", "m", { every: 1000 }), { name: "TypeError", message: /^a schedule needs exactly one of range, priority, delay \(got none\)$/ });
  await assert.rejects(q.schedule("s", "m", { every: 1000, at: 2e12 }), { name: "TypeError", message: /unknown schedule option at/ });
  await assert.rejects(q.schedule("s", "m", { every: 1000, delay: 0, start: 5 }), RangeError, "START before 2000 is refused by the server too");
  assert.deepEqual(await q.schedules(), []);
  assert.deepEqual(await t.schedules(), []);
});

test("unknown options of push, pop, schedule and nack are refused (as Python refuses an unknown keyword)", async () => {
  const q = new Queue(redis, "opts-u");
  await assert.rejects(q.push(["a"], { delay: 0, gruop: "g" }), { name: "TypeError", message: /^unknown push option gruop \(known: range, priority, at, delay, group, durable\)$/ });
  await assert.rejects(q.push(["a"], { delay: 0, basis: "b" }), { name: "TypeError", message: /unknown push option basis/ });
  await assert.rejects(q.pop({ cuont: 5 }), { name: "TypeError", message: /unknown pop option cuont/ });
  await assert.rejects(q.pop({ quantum: 2 }), { name: "TypeError", message: /unknown pop option quantum/ });
  await assert.rejects(q.schedule("s", "m", { every: 1000, delay: 0, basis: "b" }), { name: "TypeError", message: /unknown schedule option basis/ });
  assert.equal(await redis.exists("opts-u"), 0);
  await q.push(["a"], { delay: 0 });
  const [m] = await q.pop({ leaseMs: 5000 });
  await assert.rejects(m.nack({ delay: 5 }), { name: "TypeError", message: /^unknown nack option delay \(known: delayMs, dead\)$/ });
  assert.equal(await m.nack({ delayMs: 0 }), "requeued", "a refused nack leaves the message unsettled");
});

test("Topic.info takes the largest lag_ms over the slots, as Python's Topic.info does", async () => {
  const t = new Topic(redis, "lagging", 8);
  const [oldBasis, newBasis] = ["basis-a", "basis-b"];
  assert.notEqual(t.queueFor(oldBasis), t.queueFor(newBasis));
  const [sec] = await redis.time();
  const now = Number(sec) * 1000;
  await t.push(["late"], { at: now - 100_000, basis: oldBasis });
  await t.push(["later"], { at: now - 60_000, basis: newBasis });
  const perQueue = await t.infoByQueue();
  const info = await t.info();
  assert.ok(perQueue[t.queueFor(oldBasis)].lag_ms >= 100_000);
  // The largest lag (about 100 s, read a generous 30 s later at most), not the sum (160 s).
  assert.ok(info.lag_ms >= 100_000 && info.lag_ms < 130_000, `lag_ms ${info.lag_ms}`);
  assert.equal(info.waiting, 2);
  assert.equal(info.next_due, now - 100_000);
  assert.deepEqual(info.kinds, ["fixed"]);
});

test("Topic.info sums RMQ.INFO replies as Python's sum_info does (its test vector)", async () => {
  // The replies of clients/python/tests/test_client.py's test_sum_info_of_maps, plus a
  // fourth queue lagging 10 ms (so that adding lags up and taking the largest differ).
  const infos = [
    { kind: "priority", waiting: 2, ready: 2, inflight: 1, dead: 0, next_due: null, next_expiry: 500, lag_ms: null, paused: 1 },
    { kind: null, waiting: 0, ready: 0, inflight: 0, dead: 0, next_due: null, next_expiry: null, lag_ms: 0, paused: 0 },
    { kind: "range", waiting: 3, ready: 1, inflight: 2, dead: 4, next_due: 70, next_expiry: 400, lag_ms: 25, paused: 1 },
    { kind: "range", waiting: 0, ready: 0, inflight: 0, dead: 0, next_due: null, next_expiry: null, lag_ms: 10, paused: 0 },
  ];
  const fake = {
    sendCommand: async (cmd) => {
      assert.equal(cmd.name, "RMQ.INFO");
      return Object.entries(infos[Number(String(cmd.args[0]).split("_").pop())]).flat();
    },
  };
  assert.deepEqual(await new Topic(fake, "v", 4).info(), {
    kinds: ["priority", "range"], waiting: 5, ready: 3, inflight: 3, dead: 4, next_due: 70,
    next_expiry: 400, lag_ms: 25, paused: 2,
  });
});

test("push, pop, ack and nack with binary bodies", async () => {
  const q = new Queue(redis, "bin");
  const bodies = [Buffer.from([0, 1, 2, 255]), Buffer.from("\r\n$3\r\n"), "plain", Buffer.from([0xc3, 0x28])];
  assert.equal(await q.push(bodies, { priority: 5 }), 4);
  assert.equal(await q.push(["plain"], { priority: 5 }), 0, "a duplicate merges");
  const got = await q.pop({ count: 10, leaseMs: 5000 });
  assert.equal(got.length, 4);
  assert.deepEqual(got.map((m) => m.body.toString("hex")).sort(),
    bodies.map((b) => Buffer.from(b).toString("hex")).sort());
  for (const m of got) {
    assert.ok(Buffer.isBuffer(m.body));
    assert.equal(m.queue, "bin");
    assert.equal(m.deliveries, 1);
  }
  assert.equal(await got[0].ack(), true);
  await assert.rejects(got[0].ack(), AlreadySettled);
  assert.equal(await got[1].nack({ delayMs: 0 }), "requeued");
  assert.equal(await got[2].nack({ dead: true }), "dead");
  const deadline = await got[3].extend(60000);
  assert.ok(deadline > Date.now() + 50000);
  assert.equal(await got[3].ack(), true);
  const info = await q.info();
  assert.equal(info.kind, "priority");
  assert.equal(info.waiting, 1);
  assert.equal(info.dead, 1);
  assert.equal(info.inflight, 0);
  assert.equal(await q.replay(), 1);
  const again = await q.pop({ count: 10 });
  assert.equal(again.length, 2);
  assert.ok(again.every((m) => m.deliveries >= 1));
  for (const m of again) await m.ack();
});

test("a topic routes by basis, else group, else content; TPOP takes from all its queues", async () => {
  const t = new Topic(redis, "orders", 16);
  assert.equal(await t.push(["order-1001:paid"], { delay: 0, group: "order-1001", basis: "order-1001" }), 1);
  assert.equal(await redis.zcard(t.queueFor("order-1001")), 1);
  assert.equal(await t.push(["a", "b", "c"], { delay: 0, group: "g1" }), 3);
  assert.equal(await redis.call("RMQ.INFO", t.queueFor("g1")).then((r) => r[r.indexOf("waiting") + 1]), 3);
  const many = Array.from({ length: 40 }, (_, i) => `m${i}`);
  assert.equal(await t.push(many, { delay: 0 }), 40);
  for (const m of many.slice(0, 5)) assert.equal(await redis.zscore(t.queueFor(m), m) !== null, true);
  const info = await t.info();
  assert.equal(info.waiting, 44);
  assert.deepEqual(info.kinds, ["fixed"]);
  const got = await t.pop({ count: 100, leaseMs: 5000 });
  assert.equal(got.length, 42, "one of g1 in flight holds back its other two");
  assert.ok(got.every((m) => m.queue.startsWith("orders_")));
  for (const m of got) await m.ack();
  const rest = await t.pop({ count: 100 });
  assert.equal(rest.length, 1);
  await rest[0].ack();
});

test("setPolicy, policy and resetPolicy", async () => {
  const t = new Topic(redis, "pol", 4);
  await t.setPolicy({ retries: 5, backoffMs: 1000, leaseMs: 7000 });
  const p = await t.policy();
  assert.equal(Object.keys(p).length, 4);
  for (const fields of Object.values(p)) {
    assert.equal(fields.retries, 5);
    assert.equal(fields.backoffMs, 1000);
    assert.equal(fields.leaseMs, 7000);
  }
  assert.equal(await t.resetPolicy(), 4);
  assert.equal((await new Queue(redis, "pol_0").policy()).retries, 16);
});

test("pause() and resume() (RMQ.POLICY paused)", async () => {
  const q = new Queue(redis, "paused-q");
  await q.push(["x"], { delay: 0 });
  await q.pause();
  assert.equal((await q.info()).paused, 1);
  assert.deepEqual(await q.pop(), []);
  const conn = redis.duplicate();
  const blocked = q.pop({ blockMs: 5000 }, conn);
  await sleep(200);
  await q.resume();
  const got = await blocked;
  conn.disconnect();
  assert.equal(got.length, 1, "a blocked pop is woken by resume()");
  await got[0].ack();
});

test("schedule(), schedules() and unschedule() (RMQ.SCHEDULE)", async () => {
  const q = new Queue(redis, "sched");
  const [sec, usec] = await redis.time();
  const start = Number(sec) * 1000 + Math.floor(Number(usec) / 1000) + 300;
  assert.equal(await q.schedule("tick", "tick!", { every: 100, start, delay: 0 }), start);
  const list = await q.schedules();
  assert.equal(list.length, 1);
  assert.equal(list[0].name, "tick");
  assert.equal(list[0].queue, "sched");
  assert.ok(list[0].spec.includes("EVERY 100"));
  const got = await q.pop({ blockMs: 5000 });
  assert.equal(got.length, 1);
  assert.equal(got[0].body.toString(), "tick!");
  await got[0].ack();
  const topic = new Topic(redis, "tsched", 8);
  await topic.schedule("nightly", "report", { cron: "0 3 * * *", tz: "Europe/Paris", priority: 1, basis: "r" });
  assert.equal((await topic.schedules()).map((s) => s.queue).join(), topic.queueFor("r"));
  assert.equal(await topic.unschedule("nightly", "other"), 1);
  assert.equal(await q.unschedule("tick"), 1);
  assert.deepEqual(await q.schedules(), []);
  await assert.rejects(q.schedule("x", "m", { delay: 0 }), /every, cron/);
});

test("server errors reject with the server's message, and change nothing", async () => {
  const q = new Queue(redis, "kinds");
  await q.push(["a"], { priority: 1 });
  await assert.rejects(q.push(["b"], { delay: 0 }), /kind/i);
  assert.equal((await q.info()).waiting, 1);
  await redis.set("plain", "x");
  await assert.rejects(new Queue(redis, "plain").push(["m"], { delay: 0 }), /WRONGTYPE/);
  const [m] = await q.pop({ leaseMs: 5000 });
  await assert.rejects(m.nack({ delayMs: -1 }), RangeError);
  await assert.rejects(m.extend(0), RangeError);
  assert.equal(await m.ack(), true);
  assert.equal(await m.extend(1000), null, "no longer in flight");
});

test("purge empties the queue and keeps its policy and schedules; drop takes every key", async () => {
  const q = new Queue(redis, "pd");
  await q.setPolicy({ retries: 2 });
  await q.schedule("nightly", "report", { every: 86400000, delay: 0 });
  assert.equal(await q.push(["a", "b"], { delay: 0 }), 2);
  assert.equal((await q.pop()).length, 1);
  assert.equal(await q.purge(), 2);
  assert.deepEqual([(await q.info()).waiting, (await q.info()).inflight], [0, 0]);
  assert.equal((await q.policy()).retries, 2);
  assert.equal((await q.schedules()).length, 1);
  assert.equal(await q.purge({ dead: true }), 0);
  assert.equal(await q.drop(), 1);
  assert.equal(await q.drop(), 0);
  assert.deepEqual(await redis.keys("*pd*"), []);
});
