/** Worker: consume a Queue or a Topic with concurrent async handlers, leases kept alive. */

import { EventEmitter } from "events";
import http from "http";
import { Cluster, Redis, RedisOptions } from "ioredis";
import { durably } from "./durable";
import { Dead, Message } from "./message";
import { BOUNDS } from "./protocol";
import { Queue, Topic } from "./queues";
import {
  Client, MAX_MS, int, isCluster, isUnknownCommand, nodeKey, options, retrying, sleep,
} from "./util";

export type Handler = (msg: Message) => unknown;

export interface WorkerOptions {
  /** handlers running at once (default 8) */
  concurrency?: number;
  /** lease of each message, extended every third of it while its handler runs (default 30 s) */
  leaseMs?: number;
  /** a handler still running after this long is given up on: its message is nacked and
   * `msg.signal` aborted (default: no limit) */
  maxRuntimeMs?: number;
  /** at a stop, how long running handlers get before their messages are nacked (default 30 s) */
  graceMs?: number;
  /** how long a fetch waits for a message (BLOCK); a stop waits at most this (default 1 s) */
  blockMs?: number;
  /** RMQ.TPOP QUANTUM (messages per queue per turn); sent only when set */
  quantum?: number;
  /** stop gracefully on SIGINT and SIGTERM while run() runs (default true) */
  handleSignals?: boolean;
  /** serve the counters for Prometheus on http://0.0.0.0:<metricsPort>/metrics while run()
   * runs, under the metric names of the Python worker (default: not served) */
  metricsPort?: number;
  /** the `worker` label of the metrics and the prefix of reported errors (default "rmq") */
  name?: string;
}

const WORKER_OPTIONS = [
  "concurrency", "leaseMs", "maxRuntimeMs", "graceMs", "blockMs", "quantum", "handleSignals",
  "metricsPort", "name",
];

/** Counters since the worker started. */
export interface WorkerStats {
  /** handlers that returned (message then acked) */
  processed: number;
  /** handlers that threw or ran out of time (message back to waiting) */
  failed: number;
  /** messages sent to dead (Dead thrown, or retries used up) */
  dead: number;
  /** automatic lease extensions (RMQ.EXTEND) */
  extended: number;
  /** handlers given up on after maxRuntimeMs (also counted in failed or dead) */
  timedOut: number;
  /** messages still being handled at the end of a stop's grace, nacked */
  released: number;
  /** acks or nacks too late (the lease had run out) or failing: delivered again */
  lost: number;
}

const BACKOFF_MIN = 100;        // ms between failed fetches, doubling up to
const BACKOFF_MAX = 5000;
const TOPOLOGY_EVERY = 5000;    // ms, a cluster's primaries re-read at least this often
const TOPOLOGY_MIN_GAP = 500;   // ms, and at most this often
const ACK_BATCH = 1000;         // most messages acked in one round of RMQ.ACKs
const SETTLE_MS = 10_000;       // at a stop, how long acks and nacks under way may take

interface Delivery {
  msg: Message;
  state: "running" | "done" | "abandoned";
  started: number;
  extending: boolean;
}

/** One fetch loop: a connection of its own (blocking pops must not hold up the acks) to
 * the server (or to one primary of a cluster) and the loop's promise. */
interface Loop {
  conn: Client;
  done: boolean;
  ended: boolean;
  promise: Promise<void>;
}

/** The count of free handler slots, which the fetch loops wait for. */
class Slots {
  private waiters: (() => void)[] = [];

  constructor(private free: number) {}

  /** Wait for a free slot (or `stop()`); take every free slot, resolve to how many. */
  async takeAll(stop: () => boolean): Promise<number> {
    while (!this.free && !stop()) await new Promise<void>((r) => this.waiters.push(r));
    const n = this.free;
    this.free = 0;
    return n;
  }

  give(n: number): void {
    if (n > 0) {
      this.free += n;
      this.wake();
    }
  }

  wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const r of waiters) r();
  }
}

/**
 * Consumes `source` (a Queue or a Topic), calling `handler(msg)` for each message, up to
 * `concurrency` at once. A handler that resolves acks its message; one that throws nacks
 * it (back to waiting after the queue's retry backoff, or dead once its retries are used
 * up); throwing `Dead` sends it straight to dead. Messages are taken only as far as there
 * are free handlers (TPOP on every primary of a cluster, following failovers and new
 * primaries), under a lease that is extended while the handler runs. `run()` resolves
 * after `close()` (or its alias `stop()`), SIGINT or SIGTERM: fetching stops, running
 * handlers get `graceMs`, those still running then are nacked, and nothing is left in flight.
 *
 * Events: `completed` (msg, result) once acked, `failed` (msg, error) once nacked,
 * `error` (error) for fetch, ack and lease problems (the worker goes on; without an
 * `error` listener they are printed to stderr), `closed` and then `stopped` (its alias) at
 * the end of run().
 * Delivery is at least once: an ack that cannot reach the server is retried a few times,
 * after which the lease runs out and the message is delivered again.
 */
export class Worker extends EventEmitter {
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly blockMs: number;
  readonly graceMs: number;
  readonly maxRuntimeMs?: number;
  readonly quantum?: number;
  readonly metricsPort?: number;
  readonly name: string;
  private readonly handleSignals: boolean;
  private readonly counters: WorkerStats = {
    processed: 0, failed: 0, dead: 0, extended: 0, timedOut: 0, released: 0, lost: 0,
  };
  private readonly inflight = new Set<Delivery>();
  private readonly slots: Slots;
  private readonly loops = new Map<string, Loop>();
  private readonly allLoops: Loop[] = [];
  private acks: [Delivery, unknown][] = [];
  private acking: Promise<void> | null = null;
  private drainedWaiters: (() => void)[] = [];
  private stopping = false;
  private stopRequested!: () => void;
  private readonly stopSignal = new Promise<void>((r) => { this.stopRequested = r; });
  private running: Promise<void> | null = null;
  private fatal: unknown = null;
  private topologyDirty = false;
  private topologyAt = 0;
  private syncing = false;

  constructor(readonly source: Queue | Topic, readonly handler: Handler, opts: WorkerOptions = {}) {
    super();
    if (!(source instanceof Queue || source instanceof Topic)) {
      throw new TypeError("source must be a Queue or a Topic");
    }
    if (typeof handler !== "function") throw new TypeError("handler must be a function");
    opts = options("Worker", opts, WORKER_OPTIONS);
    this.concurrency = int("concurrency", opts.concurrency ?? 8, ...BOUNDS.count);
    this.leaseMs = int("leaseMs", opts.leaseMs ?? 30_000, ...BOUNDS.leaseMs);
    this.blockMs = int("blockMs", opts.blockMs ?? 1000, 1, MAX_MS);   // 0 would block forever: no stop
    this.graceMs = int("graceMs", opts.graceMs ?? 30_000, 0, MAX_MS);
    if (opts.maxRuntimeMs !== undefined) this.maxRuntimeMs = int("maxRuntimeMs", opts.maxRuntimeMs, 1, MAX_MS);
    if (opts.quantum !== undefined) {
      if (!(source instanceof Topic)) throw new TypeError("quantum is for a Topic (RMQ.TPOP)");
      this.quantum = int("quantum", opts.quantum, ...BOUNDS.quantum);
    }
    if (opts.metricsPort !== undefined) this.metricsPort = int("metricsPort", opts.metricsPort, 1, 65535);
    this.name = opts.name ?? "rmq";
    if (typeof this.name !== "string") throw new TypeError(`name must be a string, got ${String(opts.name)}`);
    this.handleSignals = opts.handleSignals ?? true;
    if (typeof this.handleSignals !== "boolean") {
      throw new TypeError(`handleSignals must be a boolean, got ${String(opts.handleSignals)}`);
    }
    const timeout = redisOptions(source.client).commandTimeout;
    if (timeout !== undefined && timeout <= this.blockMs) {
      throw new RangeError(`the client's commandTimeout (${timeout} ms) must be longer than blockMs `
        + `(${this.blockMs} ms), or blocking pops time out`);
    }
    this.slots = new Slots(this.concurrency);
  }

  /** A snapshot of the counters. */
  get stats(): WorkerStats {
    return { ...this.counters };
  }

  /** Messages taken and not yet acked or nacked by this worker. */
  get inFlight(): number {
    return this.inflight.size;
  }

  /** Consume until close() (or SIGINT/SIGTERM), then stop gracefully and resolve. Rejects
   * if the server cannot serve the worker at all (the module lacks the command) or the
   * metrics port cannot be listened on. */
  run(): Promise<void> {
    if (this.running) return Promise.reject(new Error("a Worker runs once; make a new one"));
    this.running = this.consume();
    return this.running;
  }

  /** Stop gracefully; resolves once run() has finished (at once if it never ran). BullMQ's
   * verb, and the one this client first shipped. */
  async close(): Promise<void> {
    this.stopping = true;
    this.stopRequested();
    this.slots.wake();
    if (this.running) await this.running.catch(() => undefined);
  }

  /** The same as close() (the Python worker's verb). */
  stop(): Promise<void> {
    return this.close();
  }

  // -- start and stop ---------------------------------------------------------------

  private async consume(): Promise<void> {
    const onSignal = (): void => { void this.close(); };
    if (this.handleSignals) {
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
    }
    const keeper = setInterval(() => this.keep(), Math.min(250, Math.max(10, this.leaseMs / 6)));
    let supervisor: NodeJS.Timeout | undefined;
    let metrics: http.Server | undefined;
    try {
      if (this.metricsPort !== undefined) metrics = await serveMetrics(this, this.metricsPort);
      const client = this.source.client;
      if (this.source instanceof Topic && isCluster(client)) {
        this.syncLoops(client);
        supervisor = setInterval(() => void this.followTopology(client), 100);
      } else {
        // Its own connection for the blocking pops: commands wait in line on a connection.
        const conn = isCluster(client) ? client.duplicate() : client.duplicate(fetchOptions(() => this.stopping));
        this.startLoop("server", conn);
      }
      await this.stopSignal;
    } finally {
      if (supervisor) clearInterval(supervisor);
      await this.shutdown();
      clearInterval(keeper);
      if (metrics) {
        const server = metrics;
        await new Promise((r) => { server.close(r); server.closeAllConnections(); });
      }
      if (this.handleSignals) {
        process.removeListener("SIGINT", onSignal);
        process.removeListener("SIGTERM", onSignal);
      }
      this.emit("closed");
      this.emit("stopped");
    }
    if (this.fatal) throw this.fatal;
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    this.slots.wake();
    await Promise.all(this.allLoops.map((l) => l.promise));
    await this.drained(this.graceMs);
    await Promise.all([...this.inflight].map((d) => this.abandon(d, true)));
    // What is left is being acked or nacked: wait for that (bounded, should the server
    // be gone for good).
    await this.drained(SETTLE_MS);
    for (const l of this.allLoops) l.conn.disconnect();
  }

  /** Wait until nothing is in flight, or `ms` have passed. */
  private async drained(ms: number): Promise<void> {
    if (!this.inflight.size) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((r) => this.drainedWaiters.push(r)),
      new Promise<void>((r) => { timer = setTimeout(r, ms); }),
    ]);
    clearTimeout(timer);
  }

  // -- taking messages --------------------------------------------------------------

  /** One fetch loop per primary of the cluster: loops for new primaries, an end to those
   * of nodes that are no longer primaries. */
  private syncLoops(cluster: Cluster): void {
    const primaries = new Map(cluster.nodes("master").map((n) => [nodeKey(n), n]));
    for (const [key, loop] of this.loops) {
      if (!primaries.has(key) || loop.ended) {
        loop.done = true;
        this.loops.delete(key);
      }
    }
    this.slots.wake();
    for (const [key, node] of primaries) {
      if (this.loops.has(key) || this.stopping) continue;
      let loop: Loop | undefined;
      const conn = new Redis({
        ...cluster.options.redisOptions, host: node.options.host, port: node.options.port,
        ...fetchOptions(() => this.stopping || loop?.done === true),
      });
      loop = this.startLoop(key, conn);
    }
  }

  /** Re-read a cluster's primaries every few seconds, and soon after a failed fetch. */
  private async followTopology(cluster: Cluster): Promise<void> {
    const since = Date.now() - this.topologyAt;
    if (this.syncing || this.stopping || since < TOPOLOGY_MIN_GAP || (!this.topologyDirty && since < TOPOLOGY_EVERY)) return;
    this.syncing = true;
    this.topologyDirty = false;
    this.topologyAt = Date.now();
    try {
      await new Promise<void>((resolve, reject) => cluster.refreshSlotsCache((e) => (e ? reject(e) : resolve())));
    } catch (e) {
      this.topologyDirty = true;
      this.report(new Error(`cannot read the cluster's nodes: ${(e as Error).message}`));
    } finally {
      this.syncing = false;
    }
    if (!this.stopping) this.syncLoops(cluster);
  }

  private startLoop(key: string, conn: Client): Loop {
    const loop: Loop = { conn, done: false, ended: false, promise: Promise.resolve() };
    conn.on("error", () => undefined);   // the loop reports its failed fetches itself
    loop.promise = this.fetchLoop(key, loop).finally(() => {
      loop.ended = true;
      if (!this.stopping) conn.disconnect();
    });
    this.loops.set(key, loop);
    this.allLoops.push(loop);
    return loop;
  }

  private pop(conn: Client, count: number, blockMs?: number): Promise<Message[]> {
    const opts = { count, leaseMs: this.leaseMs, blockMs };
    return this.source instanceof Topic
      ? this.source.pop({ ...opts, quantum: this.quantum }, conn)
      : this.source.pop(opts, conn);
  }

  /** Take as many messages as there are free handlers: first without blocking, and if there
   * is nothing, block for one (holding a single slot while blocked, so the loops of other
   * primaries keep the rest). */
  private async fetchLoop(where: string, loop: Loop): Promise<void> {
    const stop = (): boolean => this.stopping || loop.done;
    if (loop.conn.status === "wait") loop.conn.connect().catch(() => undefined);
    let backoff = BACKOFF_MIN;
    while (!stop()) {
      let n = await this.slots.takeAll(stop);
      if (!n) continue;
      let msgs: Message[] = [];
      let error: unknown = null;
      try {
        if (loop.conn.status !== "ready" && !(await ready(loop.conn, backoff))) {
          throw new Error(`not connected to ${where}`);
        }
        msgs = await this.pop(loop.conn, n);
        if (!msgs.length && !stop()) {
          this.slots.give(n - 1);
          n = 1;
          msgs = await this.pop(loop.conn, 1, this.blockMs);
        }
      } catch (e) {
        error = e;
      }
      this.slots.give(n - msgs.length);
      for (const m of msgs) this.handle(m);
      if (error === null) {
        backoff = BACKOFF_MIN;
      } else if (isUnknownCommand(error)) {
        this.fatal = error;
        void this.close();
      } else if (!stop()) {
        this.report(new Error(`fetching from ${where} failed: ${(error as Error).message}; retrying in ${backoff} ms`));
        this.topologyDirty = true;
        await Promise.race([sleep(backoff), this.stopSignal]);
        backoff = Math.min(backoff * 2, BACKOFF_MAX);
      }
    }
  }

  // -- running handlers -------------------------------------------------------------

  /** Run the handler; a synchronous one settles without a trip through the microtask
   * queue. */
  private handle(msg: Message): void {
    const d: Delivery = { msg, state: "running", started: Date.now(), extending: false };
    this.inflight.add(d);
    let result: unknown;
    try {
      result = this.handler(msg);
    } catch (e) {
      void this.settle(d, true, e);
      return;
    }
    if (typeof (result as PromiseLike<unknown> | null)?.then === "function") {
      (result as PromiseLike<unknown>).then((r) => this.settle(d, false, r), (e) => this.settle(d, true, e));
    } else {
      void this.settle(d, false, result);
    }
  }

  /** The handler returned `value` (or threw it, `failed`): ACK (in a batch) or NACK. */
  private async settle(d: Delivery, failed: boolean, value: unknown): Promise<void> {
    if (d.state === "abandoned") return;     // given up on: its outcome no longer counts
    d.state = "done";
    this.slots.give(1);                      // free for the next message while this settles
    const msg = d.msg;
    if (!failed && msg.claim()) {
      this.acks.push([d, value]);
      if (!this.acking) this.acking = this.flushAcks();
      return;
    }
    if (failed) await this.nackFailed(msg, value);
    else {
      this.counters.processed++;             // the handler acked or nacked it itself
      this.emit("completed", msg, value);
    }
    this.finish(d);
  }

  /** NACK after a handler threw (DEAD for Dead), unless it settled the message itself. */
  private async nackFailed(msg: Message, error: unknown): Promise<void> {
    const dead = error instanceof Dead;
    if (msg.claim()) {
      try {
        this.countNack(await msg.sendNack({ dead }));
      } catch (e) {
        this.counters.lost++;
        this.report(new Error(`could not nack ${msg}: ${(e as Error).message}; its lease will run out`));
      }
    } else {
      this.counters[dead ? "dead" : "failed"]++;
    }
    this.emit("failed", msg, error);
  }

  private countNack(reply: "requeued" | "dead" | null): void {
    if (reply === null) this.counters.lost++;
    else this.counters[reply === "dead" ? "dead" : "failed"]++;
  }

  /** ACK what the handlers finished meanwhile: one RMQ.ACK per queue, all at once. */
  private async flushAcks(): Promise<void> {
    await new Promise((r) => setImmediate(r));   // the rest of the batch finishes first
    while (this.acks.length) {
      const batch = this.acks.splice(0, ACK_BATCH);
      const byQueue = new Map<string, Buffer[]>();
      for (const [d] of batch) {
        const list = byQueue.get(d.msg.queue);
        if (list) list.push(d.msg.body);
        else byQueue.set(d.msg.queue, [d.msg.body]);
      }
      const client = this.source.client;
      await Promise.all([...byQueue].map(async ([q, bodies]) => {
        try {
          const [acked] = await retrying(() => durably(client, this.source.durable, "RMQ.ACK",
            [{ name: "RMQ.ACK", key: q, args: [q, ...bodies] }]));
          this.counters.lost += bodies.length - Number(acked);
        } catch (e) {
          this.counters.lost += bodies.length;
          this.report(new Error(`could not ack ${bodies.length} messages on ${q}: ${(e as Error).message}; `
            + "they will be delivered again"));
        }
      }));
      this.counters.processed += batch.length;
      for (const [d, result] of batch) {
        this.finish(d);
        this.emit("completed", d.msg, result);
      }
    }
    this.acking = null;
  }

  /** The worker is done with this delivery (acked, nacked or given up on). */
  private finish(d: Delivery): void {
    this.inflight.delete(d);
    if (!this.inflight.size && this.drainedWaiters.length) {
      const waiters = this.drainedWaiters;
      this.drainedWaiters = [];
      for (const r of waiters) r();
    }
  }

  /** Give up on a delivery: at a stop (nack it, due again now) or after maxRuntimeMs (nack
   * it as failed). Its handler cannot be cancelled; `msg.signal` tells it. */
  private async abandon(d: Delivery, stopping: boolean): Promise<void> {
    if (d.state !== "running") return;
    d.state = "abandoned";
    const msg = d.msg;
    this.counters[stopping ? "released" : "timedOut"]++;
    msg.giveUp(stopping ? "the worker is stopping" : `ran longer than maxRuntimeMs (${this.maxRuntimeMs} ms)`);
    if (msg.claim()) {
      try {
        // At a stop it is not the message's fault: due again at once.
        const reply = await msg.sendNack(stopping ? { delayMs: 0 } : {});
        if (!stopping) this.countNack(reply);
      } catch (e) {
        this.counters.lost++;
        this.report(new Error(`could not nack ${msg}: ${(e as Error).message}; its lease will run out`));
      }
    }
    if (!stopping) this.emit("failed", msg, new Error(`handler ran longer than maxRuntimeMs (${this.maxRuntimeMs} ms)`));
    this.finish(d);
    this.slots.give(1);
  }

  // -- leases -----------------------------------------------------------------------

  /** Extend each lease a third of a lease after its last extension; give up on handlers
   * past maxRuntimeMs. */
  private keep(): void {
    const now = Date.now();
    for (const d of this.inflight) {
      if (d.state !== "running") continue;
      if (this.maxRuntimeMs !== undefined && now - d.started > this.maxRuntimeMs) {
        void this.abandon(d, false);
      } else if (d.msg.leaseEnd !== null && !d.extending && !d.msg.settled
                 && now >= d.msg.leaseEnd - (this.leaseMs * 2) / 3) {
        d.extending = true;
        d.msg.extend(this.leaseMs).then((deadline) => {
          if (deadline !== null) this.counters.extended++;
          else if (!d.msg.settled) this.report(new Error(`the lease of ${d.msg} ran out before it was extended; it will be delivered again`));
        }, (e: Error) => this.report(new Error(`extending the lease of ${d.msg} failed: ${e.message}`)))
          .finally(() => { d.extending = false; });
      }
    }
  }

  private report(error: Error): void {
    if (this.listenerCount("error")) this.emit("error", error);
    else console.error(`${this.name}: ${error.message}`);
  }
}

/** The worker's events, typed. */
export interface Worker {
  on(event: "completed", listener: (msg: Message, result: unknown) => void): this;
  on(event: "failed", listener: (msg: Message, error: unknown) => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  on(event: "closed" | "stopped", listener: () => void): this;
  once(event: "completed", listener: (msg: Message, result: unknown) => void): this;
  once(event: "failed", listener: (msg: Message, error: unknown) => void): this;
  once(event: "error", listener: (error: Error) => void): this;
  once(event: "closed" | "stopped", listener: () => void): this;
}

function redisOptions(client: Client): RedisOptions {
  return isCluster(client) ? client.options.redisOptions ?? {} : client.options;
}

/** The options of a fetch loop's own connection: a command fails at once while the
 * connection is down (the loop retries with backoff), and reconnects end with the loop. */
function fetchOptions(ended: () => boolean): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times: number) => (ended() ? null : Math.min(times * 100, 2000)),
  };
}

/** Wait up to `ms` for the connection to be ready. */
function ready(conn: Client, ms: number): Promise<boolean> {
  if (conn.status === "ready") return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      conn.removeListener("ready", onReady);
      resolve(ok);
    };
    const onReady = (): void => done(true);
    const timer = setTimeout(() => done(false), ms);
    conn.once("ready", onReady);
  });
}

/** The Prometheus text of `worker`'s counters: the names and help of the Python worker's
 * (`rmq_worker_<counter>_total`, `rmq_worker_in_flight`), so one dashboard serves both. */
function metricsText(worker: Worker): string {
  const label = `{worker="${worker.name.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`))}"}`;
  const lines: string[] = [];
  for (const [field, value] of Object.entries(worker.stats)) {
    const snake = field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    const metric = `rmq_worker_${snake}`;
    lines.push(`# HELP ${metric} RMQ worker: ${snake}`, `# TYPE ${metric} counter`, `${metric}_total${label} ${value}`);
  }
  lines.push("# HELP rmq_worker_in_flight RMQ worker: messages in flight", "# TYPE rmq_worker_in_flight gauge",
    `rmq_worker_in_flight${label} ${worker.inFlight}`);
  return `${lines.join("\n")}\n`;
}

/** Listen on `port` (all interfaces, as Python's prometheus_client does) for GET /metrics. */
function serveMetrics(worker: Worker, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" }).end(metricsText(worker));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, () => {
      server.removeListener("error", reject);
      resolve(server);
    });
  });
}
