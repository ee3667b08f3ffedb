// A Redis without the RMQ module: calls reject with ModuleNotLoaded, which says the module
// is not loaded and how to load it (and keeps the server's words); other errors pass as
// they are.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { ReplyError } from "ioredis";
import { ModuleNotLoaded, Queue, Topic } from "../dist/index.js";
import { startServer } from "./redis_servers.mjs";

let plain;
let withModule;

before(async () => {
  [plain, withModule] = await Promise.all([startServer({ module: false }), startServer()]);
});
after(() => Promise.all([plain.stop(), withModule.stop()]));

const HINT = /RMQ module is not loaded on this Redis server.*--loadmodule \/path\/to\/librmq\.so.*`loadmodule \/path\/to\/librmq\.so` to its redis\.conf/;

test("queue, topic and schedule calls say the module is not loaded and how to load it", async () => {
  const client = plain.client();
  const q = new Queue(client, "orders");
  const t = new Topic(client, "events", 4);
  const calls = {
    "RMQ.PUSH": () => q.push("a", { priority: 1 }),
    "RMQ.POP": () => q.pop(),
    "RMQ.INFO": () => t.info(),
    "RMQ.SCHEDULE": () => q.schedule("s", "m", { every: 1000, priority: 1 }),
  };
  for (const [command, call] of Object.entries(calls)) {
    const e = await call().then(() => null, (err) => err);
    assert.ok(e instanceof ModuleNotLoaded, `${command}: ${e}`);
    assert.ok(e instanceof ReplyError, "still a ReplyError, as the server's error was");
    assert.equal(e.name, "ModuleNotLoaded");
    assert.equal(e.command, command);
    assert.match(e.message, HINT);
    assert.ok(e.message.startsWith(`${command}: `), e.message);
    assert.match(e.message, new RegExp(`unknown command '${command.replace(".", "\\.")}'`), "the server's words are kept");
  }
  client.disconnect();
});

test("an error of the module, with the module loaded, is left as it is", async () => {
  const client = withModule.client();
  const q = new Queue(client, "kinds");
  await q.push("a", { priority: 1 });
  const e = await q.push("b", { delay: 10 }).then(() => null, (err) => err);
  assert.ok(e instanceof ReplyError, String(e));
  assert.ok(!(e instanceof ModuleNotLoaded));
  client.disconnect();
});
