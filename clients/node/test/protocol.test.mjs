// clients/protocol.json is the one source of the commands' argument bounds: this client's
// copy (src/protocol.ts, written by clients/gen_protocol.py) must be that file. The Python
// suite checks that the server takes every bound and refuses just past it.

import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { BOUNDS, POLICY_FIELDS } from "../dist/protocol.js";
import { Queue } from "../dist/index.js";
import { REPO } from "./redis_servers.mjs";

const protocol = JSON.parse(fs.readFileSync(path.join(REPO, "clients", "protocol.json"), "utf8"));
const camelKeys = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/_(\w)/g, (_, c) => c.toUpperCase()), v]));

test("the generated copy is protocol.json", () => {
  assert.deepEqual(BOUNDS, camelKeys(protocol.bounds));
  assert.deepEqual(POLICY_FIELDS, camelKeys(protocol.policy_fields));
});

test("a bound past 2^53 is said with every digit, as the contract and the Python client say it", async () => {
  const q = new Queue({}, "q");     // refused before anything is sent: no client needed
  await assert.rejects(q.setPolicy({ maxQueueLength: 2 ** 63 }),
    { name: "RangeError", message: "maxQueueLength must be in [0, 4611686018427387904], got 9223372036854775808" });
  await assert.rejects(q.setPolicy({ toString: 1 }), /unknown policy field toString/);
});
