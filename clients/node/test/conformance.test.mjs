// The clients' shared conformance cases (clients/conformance.json), run by this client against
// a real server: the Python client's suite runs the same file (tests/test_conformance.py), so
// the same calls give the same replies in both. The file's `about` says how a step reads;
// call and option names are the file's snake_case turned into camelCase word for word.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { Message, Queue, Topic, route } from "../dist/index.js";
import { REPO, startServer } from "./redis_servers.mjs";

const { cases } = JSON.parse(fs.readFileSync(path.join(REPO, "clients", "conformance.json"), "utf8"));

let server;
let redis;

before(async () => {
  server = await startServer();
  redis = server.client();
});
after(() => server.stop());

const camel = (s) => s.replace(/_(\w)/g, (_, c) => c.toUpperCase());
const snake = (s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function target(on) {
  const [kind, name, slots] = on.split(" ");
  return kind === "topic" ? new Topic(redis, name, Number(slots)) : new Queue(redis, name);
}

/** A reply in the file's terms: messages as [queue, body, deliveries], text for bytes,
 * snake_case keys, null for nothing. */
function normal(reply) {
  if (reply === undefined || reply === null) return null;
  if (reply instanceof Message) return [reply.queue, reply.body.toString(), reply.deliveries];
  if (Buffer.isBuffer(reply)) return reply.toString();
  if (Array.isArray(reply)) return reply.map(normal);
  if (typeof reply === "object") return Object.fromEntries(Object.entries(reply).map(([k, v]) => [snake(k), normal(v)]));
  return reply;
}

async function call(step, held) {
  const args = step.args ?? [];
  const opts = step.options && Object.fromEntries(Object.entries(step.options).map(([k, v]) => [camel(k), v]));
  if (step.call === "route") return route(...args);
  const on = target(step.on);
  const callArgs = step.call === "push" ? [args] : [...args];
  if (opts !== undefined) callArgs.push(opts);
  if (["ack", "nack", "extend"].includes(step.call)) {
    const [body] = callArgs.splice(0, 1);
    const msg = held.find((m) => m.body.toString() === body && (on instanceof Topic || m.queue === on.name));
    return msg[step.call](...callArgs);
  }
  const reply = await on[camel(step.call)](...callArgs);
  if (step.call === "pop") held.unshift(...reply);
  return reply;
}

for (const c of cases) {
  test(c.name, async () => {
    await redis.flushall();
    const held = [];
    for (const [i, step] of c.steps.entries()) {
      const where = `step ${i} ${step.on ?? ""} ${step.call}`;
      if ("expect_error" in step) {
        await assert.rejects(async () => call(step, held), (e) => e.message.includes(step.expect_error), where);
        continue;
      }
      const got = normal(await call(step, held));
      if ("expect" in step) assert.deepEqual(got, step.expect, where);
      if ("expect_has" in step) {
        assert.deepEqual(Object.fromEntries(Object.keys(step.expect_has).map((k) => [k, got[k] ?? null])), step.expect_has, where);
      }
      if ("expect_type" in step) assert.ok(Number.isInteger(got), where);
      if ("expect_len" in step) {
        const [low, high] = step.expect_len;
        assert.ok(got.length >= low && got.length <= high, `${where}: ${got.length} entries`);
      }
      if ("expect_queues" in step) {
        const counts = Object.fromEntries(Object.keys(step.expect_queues).map((q) => [q, got.filter((m) => m[0] === q).length]));
        assert.deepEqual(counts, step.expect_queues, where);
      }
    }
  });
}
