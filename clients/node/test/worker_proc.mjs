// A worker process for the tests: node worker_proc.mjs '<json config>'.
// Config: port, topic, slots, concurrency, leaseMs, handler ("lock": hold the message's
// group in a plain key while handling, counting overlaps; "hang": print and never return),
// holdMs. Prints "ready" once consuming, "started <body>" per message, exits 0 after a
// graceful stop (SIGTERM).

import { Redis } from "ioredis";
import { Topic, Worker } from "../dist/index.js";

const cfg = JSON.parse(process.argv[2]);
const redis = new Redis({ port: cfg.port, host: "127.0.0.1" });
const topic = new Topic(redis, cfg.topic, cfg.slots);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const handlers = {
  async lock(msg) {
    const group = msg.body.toString().split(":")[0];
    // Someone else holding this group now would be two handlers on one group at once.
    if ((await redis.set(`lock:${group}`, process.pid, "NX")) === null) await redis.incr("overlaps");
    await sleep(cfg.holdMs);
    await redis.del(`lock:${group}`);
    await redis.rpush("done", msg.body);
  },
  hang(msg) {
    console.log(`started ${msg.body}`);
    return new Promise(() => {});
  },
};

const worker = new Worker(topic, handlers[cfg.handler], { concurrency: cfg.concurrency, leaseMs: cfg.leaseMs, blockMs: 200 });
worker.on("error", (e) => console.error(e.message));
const running = worker.run();
console.log("ready");
await running;
console.log(`stopped ${JSON.stringify(worker.stats)}`);
redis.disconnect();
