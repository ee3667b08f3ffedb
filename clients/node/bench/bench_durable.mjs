// What durable mode costs the Node client (issue #35), on a Redis Cluster and on one primary
// with a replica, side by side in the same run:
//
//   node bench/bench_durable.mjs [--seconds S] [--rounds R] [--out FILE]
//
// Starts its own servers with the tests' harness (RMQ_MODULE, RMQ_SERVER_BIN): a 3-primary
// cluster with a replica each, and a primary with one replica; stops them by pid. One
// producer, one push in flight (the latency-bound case, where the WAIT's wait for the
// replica shows most), batches of 1 and 100 new messages per push, on one queue:
//   redis async / redis durable 1     a Redis client on the primary
//   cluster async / cluster durable 1 a Cluster client (durable: the push and its WAIT on
//                                     the connection of the queue's primary)
// Each cell: the median over R rounds of S seconds of msgs/s and of the p99 push latency;
// then durable's msgs/s over async's, the median of the per-round ratios.
// Everything shares this machine's cores (no pinning: 7 servers), so compare within a run.

import fs from "node:fs";
import { Queue } from "../dist/index.js";
import { Server, TestCluster, startServer, waitFor } from "../test/redis_servers.mjs";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const SECONDS = Number(args.seconds ?? 3);
const ROUNDS = Number(args.rounds ?? 5);

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

async function oneRound(queue, batch, tag) {
  const lat = [];
  let n = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  while (performance.now() < end) {
    const msgs = Array.from({ length: batch }, (_, i) => `${tag}-${n + i}`);
    const t = performance.now();
    await queue.push(msgs, { priority: 0 });
    lat.push(performance.now() - t);
    n += batch;
  }
  lat.sort((a, b) => a - b);
  return [n / ((performance.now() - start) / 1000), lat[Math.floor(lat.length * 0.99)]];
}

const primary = await startServer({ conf: ["--repl-diskless-sync-delay", "0"] });
const replica = await new Server({ conf: ["--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", primary.port] }).start();
const cluster = await new TestCluster(3, 1).start();
try {
  const rc = replica.client();
  await waitFor(async () => (await rc.info("replication")).includes("master_link_status:up"), 30000, "replica in sync");
  const redis = primary.client();
  const clustered = cluster.client();
  const settings = [
    ["redis async", redis, 0], ["redis durable 1", redis, 1],
    ["cluster async", clustered, 0], ["cluster durable 1", clustered, 1],
  ];
  const cells = new Map();
  for (let round = 0; round <= ROUNDS; round++) {        // round 0: warm-up, not counted
    for (const batch of [1, 100]) {
      for (const [name, client, durable] of settings) {
        const q = new Queue(client, `bench-${round}-${batch}`, { durable: durable ? { replicas: 1, timeoutMs: 10000 } : 0 });
        const got = await oneRound(q, batch, name.replace(/ /g, "-"));
        if (round > 0) cells.set(`${name}|${batch}`, [...(cells.get(`${name}|${batch}`) ?? []), got]);
      }
    }
  }
  clustered.disconnect();
  const lines = [
    "# Durable mode in the Node client: Redis Cluster vs one primary",
    "",
    `\`node bench/bench_durable.mjs --seconds ${SECONDS} --rounds ${ROUNDS}\` (clients/node): one producer, one push`,
    "in flight, one queue; medians over the rounds (msgs/s; p99 push latency in ms). Servers: a",
    "primary with a replica, and a 3-primary cluster with a replica each, all on this machine,",
    "unpinned.",
    "",
    "| setting | batch 1 msgs/s | p99 ms | batch 100 msgs/s | p99 ms |",
    "|---|---:|---:|---:|---:|",
  ];
  for (const [name] of settings) {
    const row = [1, 100].flatMap((b) => {
      const rs = cells.get(`${name}|${b}`);
      return [Math.round(median(rs.map((r) => r[0]))).toLocaleString("en-US"), median(rs.map((r) => r[1])).toFixed(2)];
    });
    lines.push(`| ${name} | ${row.join(" | ")} |`);
  }
  // per round, durable's msgs/s over async's of the same client in that round
  const ratio = (target, b) => {
    const [a, d] = ["async", "durable 1"].map((m) => cells.get(`${target} ${m}|${b}`));
    return `${median(d.map((r, i) => r[0] / a[i][0])).toFixed(2)}×`;
  };
  lines.push("", "Durable 1 over async, msgs/s (median of the per-round ratios), batch 1 / batch 100:");
  for (const target of ["redis", "cluster"]) lines.push(`- ${target}: ${ratio(target, 1)} / ${ratio(target, 100)}`);
  const text = lines.join("\n") + "\n";
  process.stdout.write(text);
  if (args.out) fs.writeFileSync(args.out, text);
} finally {
  await cluster.stop();
  await replica.stop();
  await primary.stop();
}
