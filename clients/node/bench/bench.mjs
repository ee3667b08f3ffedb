// The Node worker's throughput against a hand-written TPOP/ACK loop and against BullMQ, on
// one redis-server (with the module), in the same run:
//
//   node bench/bench.mjs [--messages N] [--rounds R] [--concurrency C] [--slots S] [--out FILE]
//
// Starts its own redis-server (the tests' harness: RMQ_MODULE, RMQ_SERVER_BIN), pinned to
// core 0 with taskset when there are 2 cores or more, while this process re-runs itself
// pinned to core 1; the server is stopped by pid at the end. Each round, for each peer, the
// database is emptied, N jobs are loaded (not timed) and then consumed (timed, until the
// last one is acknowledged by the server):
//   rmq-worker  rmq-redis's Worker on a Topic of S slots, no-op handler, concurrency C
//   hand-loop   one connection: RMQ.TPOP COUNT C LEASE 30000, then one RMQ.ACK per queue
//               of the batch (pipelined), until N are acked
//   bullmq      BullMQ's Worker, concurrency C, no-op processor, removeOnComplete (its
//               fastest setting), jobs added with Queue.addBulk
// A warm-up round first (not counted). Reports jobs/s per round, the medians, and the
// median of the per-round ratios against the targets (worker ≥ 0.8× the hand loop, ≥ 3×
// BullMQ). --peers rmq-worker,hand-loop runs only those (for profiling; no file written).

import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import { Redis } from "ioredis";
import { Queue as BullQueue, Worker as BullWorker } from "bullmq";
import { Topic, Worker } from "../dist/index.js";
import { startServer, serverBinary } from "../test/redis_servers.mjs";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
let N = Number(args.messages ?? 50000);
const ROUNDS = Number(args.rounds ?? 5);
const C = Number(args.concurrency ?? 100);
const SLOTS = Number(args.slots ?? 16);
const PIN = os.cpus().length >= 2 && spawnSync("taskset", ["--version"]).status === 0;

if (PIN && !process.env.RMQ_BENCH_PINNED) {
  const p = spawnSync("taskset", ["-c", "1", process.execPath, ...process.argv.slice(1)],
    { stdio: "inherit", env: { ...process.env, RMQ_BENCH_PINNED: "1" } });
  process.exit(p.status ?? 1);
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

async function fillTopic(redis) {
  const topic = new Topic(redis, "bench", SLOTS);
  for (let i = 0; i < N; i += 5000) {
    const batch = [];
    for (let j = i; j < Math.min(N, i + 5000); j++) batch.push(`m${String(j).padStart(8, "0")}`);
    await topic.push(batch, { priority: 1 });
  }
  return topic;
}

// Each peer: load() puts N jobs in (not timed), consume(ctx) takes them all out (timed).

const rmqWorker = (redis) => ({
  load: () => fillTopic(redis),
  async consume(topic) {
    let done = 0;
    let finished;
    const allDone = new Promise((r) => { finished = r; });
    const w = new Worker(topic, () => {}, { concurrency: C, handleSignals: false });
    w.on("completed", () => { if (++done === N) finished(); });
    const running = w.run();
    await allDone;
    return async () => { await w.stop(); await running; };
  },
});

const handLoop = (redis) => ({
  load: () => fillTopic(redis),
  async consume(topic) {
    const conn = redis.duplicate();
    let done = 0;
    while (done < N) {
      const reply = await conn.callBuffer("RMQ.TPOP", topic.name, SLOTS, "COUNT", C, "LEASE", 30000, "BLOCK", 1000);
      if (!reply) continue;
      const byQueue = new Map();
      for (const [q, m] of reply) {
        const k = q.toString();
        if (!byQueue.has(k)) byQueue.set(k, []);
        byQueue.get(k).push(m);
      }
      const acked = await Promise.all([...byQueue].map(([q, ms]) => conn.call("RMQ.ACK", q, ...ms)));
      done += acked.reduce((a, b) => a + b, 0);
    }
    return async () => conn.disconnect();
  },
});

const bullmq = (port) => {
  const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
  return {
    async load() {
      const queue = new BullQueue("bench", { connection });
      for (let i = 0; i < N; i += 5000) {
        const jobs = [];
        for (let j = i; j < Math.min(N, i + 5000); j++) {
          jobs.push({ name: "job", data: { n: j }, opts: { removeOnComplete: true } });
        }
        await queue.addBulk(jobs);
      }
      return queue;
    },
    async consume(queue) {
      let done = 0;
      let finished;
      const allDone = new Promise((r) => { finished = r; });
      const worker = new BullWorker("bench", async () => {}, { connection, concurrency: C });
      worker.on("completed", () => { if (++done === N) finished(); });
      await allDone;
      return async () => { await worker.close(); await queue.close(); };
    },
  };
};

/** One timed consumption: jobs/s, the server's CPU per job (INFO commandstats, all
 * commands) and this process's CPU per job, both in µs. */
async function measure(redis, peer) {
  await redis.flushall();
  const ctx = await peer.load();
  await redis.config("RESETSTAT");
  const cpu = process.cpuUsage();
  const start = performance.now();
  const cleanup = await peer.consume(ctx);
  const secs = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  const stats = await redis.info("commandstats");
  await cleanup();
  const serverUs = [...stats.matchAll(/usec=(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
  return { rate: N / secs, serverUs: serverUs / N, clientUs: (used.user + used.system) / N };
}

const loadBefore = os.loadavg()[0];
const server = await startServer({ wrap: PIN ? ["taskset", "-c", "0"] : [] });
const redis = new Redis({ port: server.port, host: "127.0.0.1" });
const allPeers = { "rmq-worker": rmqWorker(redis), "hand-loop": handLoop(redis), bullmq: bullmq(server.port) };
const peers = Object.fromEntries(Object.entries(allPeers).filter(([k]) => !args.peers || args.peers.split(",").includes(k)));
const results = Object.fromEntries(Object.keys(peers).map((k) => [k, []]));
const cpu = Object.fromEntries(Object.keys(peers).map((k) => [k, { server: [], client: [] }]));
try {
  // A warm-up round (JIT, connections), not counted.
  const full = N;
  N = Math.max(1000, Math.floor(N / 5));
  for (const peer of Object.values(peers)) await measure(redis, peer);
  N = full;
  for (let r = 1; r <= ROUNDS; r++) {
    for (const [name, peer] of Object.entries(peers)) {
      const m = await measure(redis, peer);
      results[name].push(m.rate);
      cpu[name].server.push(m.serverUs);
      cpu[name].client.push(m.clientUs);
      console.log(`round ${r}: ${name.padEnd(10)} ${Math.round(m.rate).toLocaleString("en")} jobs/s, `
        + `server ${m.serverUs.toFixed(2)} µs/job, client ${m.clientUs.toFixed(2)} µs/job`);
    }
  }
} finally {
  redis.disconnect();
  await server.stop();
}

const med = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)]));
// The ratio of each round (its peers ran back to back), then their median: steadier than
// the ratio of the medians on a machine whose load changes between rounds.
const ratio = (a, b) => (results[a] && results[b] ? median(results[a].map((x, i) => x / results[b][i])) : NaN);
const vsLoop = ratio("rmq-worker", "hand-loop");
const vsBull = ratio("rmq-worker", "bullmq");
const fmt = (x) => Math.round(x).toLocaleString("en");
const version = (cmd) => spawnSync(cmd[0], cmd.slice(1), { encoding: "utf8" }).stdout.trim().split("\n")[0];
const bullVersion = JSON.parse(fs.readFileSync(new URL("../node_modules/bullmq/package.json", import.meta.url))).version;
const ioredisVersion = JSON.parse(fs.readFileSync(new URL("../node_modules/ioredis/package.json", import.meta.url))).version;
const lines = [
  "# Node worker benchmark (clients/node/bench/bench.mjs, `make bench-node`)",
  "",
  `${N.toLocaleString("en")} jobs per peer per round, concurrency ${C}, a topic of ${SLOTS} slots for RMQ; `
  + `${ROUNDS} rounds, medians. One redis-server (${version([serverBinary(), "--version"])}) with the module`
  + `${PIN ? ", pinned to core 0; clients on core 1 (taskset)" : " (not pinned: fewer than 2 cores or no taskset)"}. `
  + `Node ${process.version}, ioredis ${ioredisVersion}, BullMQ ${bullVersion} (Worker with a no-op processor, `
  + "jobs added with addBulk and removeOnComplete). Timed: from the consumer's start to the last job acknowledged; "
  + "loading is not timed; a warm-up round of each peer (N/5 jobs) first, not counted.",
  "",
  "| peer | " + Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}`).join(" | ") + " | median jobs/s |",
  "|---|" + "---:|".repeat(ROUNDS + 1),
  ...Object.entries(results).map(([k, v]) => `| ${k} | ${v.map(fmt).join(" | ")} | **${fmt(med[k])}** |`),
  "",
  "CPU per job (medians; steadier than jobs/s on a shared machine): the server's from INFO commandstats "
  + "(every command's usec, reset before each consumption), the client process's from process.cpuUsage().",
  "",
  "| peer | server µs/job | client µs/job |",
  "|---|---:|---:|",
  ...Object.entries(cpu).map(([k, v]) => `| ${k} | ${median(v.server).toFixed(2)} | ${median(v.client).toFixed(2)} |`),
  "",
  "Ratios: the median over the rounds of each round's ratio (the ratio of the medians in brackets).",
  "",
  `- rmq-worker / hand-loop: **${vsLoop.toFixed(2)}×** (${(med["rmq-worker"] / med["hand-loop"]).toFixed(2)}×; target ≥ 0.8×): ${vsLoop >= 0.8 ? "PASS" : "MISS"}`,
  `- rmq-worker / bullmq: **${vsBull.toFixed(2)}×** (${(med["rmq-worker"] / med.bullmq).toFixed(2)}×; target ≥ 3×): ${vsBull >= 3 ? "PASS" : "MISS"}`,
  "",
  `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), ${new Date().toISOString().slice(0, 16)} UTC, `
  + `load average ${loadBefore.toFixed(1)} at the start and ${os.loadavg()[0].toFixed(1)} at the end; `
  + "shared with other jobs, so figures vary between runs: compare the ratios, measured in the same run.",
  "",
];
console.log(lines.join("\n"));
if (args.out && !args.peers) fs.writeFileSync(args.out, lines.join("\n"));
