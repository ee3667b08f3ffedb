// Test servers for the Node client: redis-server (or RMQ_SERVER_BIN) processes started here
// on free ports of 127.0.0.1 with the RMQ module (RMQ_MODULE, default
// <repo>/target/release/librmq.so), each in its own temporary dir, stopped by pid (never
// by name); a Redis Cluster of them made with redis-cli --cluster create.

import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis, Cluster } from "ioredis";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..", "..");
const live = new Set();

process.on("exit", () => {
  for (const s of live) {
    try { process.kill(s.proc.pid, "SIGKILL"); } catch { /* already gone */ }
  }
});

function which(name) {
  if (name.includes(path.sep)) return fs.existsSync(name) ? path.resolve(name) : null;
  for (const dir of (process.env.PATH || "").split(path.delimiter)) {
    const p = path.join(dir, name);
    try { fs.accessSync(p, fs.constants.X_OK); return p; } catch { /* next */ }
  }
  return null;
}

export function modulePath() {
  const p = path.resolve(process.env.RMQ_MODULE || path.join(REPO, "target", "release", "librmq.so"));
  if (!fs.existsSync(p)) throw new Error(`RMQ module not found at ${p}: run cargo build --release or set RMQ_MODULE`);
  return p;
}

export function serverBinary() {
  const name = process.env.RMQ_SERVER_BIN || process.env.REDIS_SERVER || "redis-server";
  const exe = which(name);
  if (!exe) throw new Error(`server binary ${name} not found (set RMQ_SERVER_BIN)`);
  return exe;
}

function cliBinary() {
  for (const name of [process.env.RMQ_CLI_BIN, "redis-cli", "valkey-cli"]) {
    const exe = name && which(name);
    if (exe) return exe;
  }
  throw new Error("neither redis-cli nor valkey-cli found");
}

function bindable(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

export async function freePort(clusterBus = false, avoid = new Set()) {
  for (let i = 0; i < 200; i++) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.once("error", reject);
      s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    });
    if (avoid.has(port) || avoid.has(port + 10000)) continue;
    if (clusterBus && (port + 10000 > 65535 || !(await bindable(port + 10000)))) continue;
    return port;
  }
  throw new Error("no free port");
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(pred, timeoutMs, what = "condition", interval = 20) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = await pred();
      if (v) return v;
    } catch (e) { last = e; }
    await sleep(interval);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last.message})` : ""}`);
}

/** One server process with the module loaded. */
export class Server {
  constructor({ conf = [], moduleArgs = [], clusterBus = false, port, module = true, wrap = [] } = {}) {
    this.module = module;
    this.wrap = wrap;   // a command that execs the server (taskset -c 0): the pid stays
    this.conf = conf.map(String);
    this.moduleArgs = moduleArgs.map(String);
    this.clusterBus = clusterBus;
    this.port = port;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "rmq-node-"));
    this.clients = [];
  }

  get addr() { return `127.0.0.1:${this.port}`; }

  async start() {
    if (!this.port) this.port = await freePort(this.clusterBus);
    const argv = ["--port", this.port, "--bind", "127.0.0.1", "--dir", this.dir,
      "--logfile", path.join(this.dir, "server.log"), "--daemonize", "no", "--save", "",
      "--appendonly", "no", ...(this.module ? ["--loadmodule", modulePath(), ...this.moduleArgs] : []),
      ...this.conf].map(String);
    const [exe, ...args] = [...this.wrap, serverBinary(), ...argv];
    this.proc = spawn(exe, args, { cwd: this.dir, stdio: "ignore" });
    live.add(this);
    await waitFor(async () => {
      if (this.proc.exitCode !== null) throw new Error(`server exited (${this.proc.exitCode}): ${this.logTail()}`);
      const c = new Redis({ port: this.port, host: "127.0.0.1", lazyConnect: true, retryStrategy: null, maxRetriesPerRequest: 0 });
      c.on("error", () => {});
      try {
        await c.connect();
        return (await c.ping()) === "PONG";
      } finally { c.disconnect(); }
    }, 20000, `server on ${this.port}`, 50).catch((e) => { this.stop(); throw e; });
    return this;
  }

  logTail() {
    try { return fs.readFileSync(path.join(this.dir, "server.log"), "utf8").slice(-2000); } catch { return ""; }
  }

  /** A client (closed at stop). */
  client(opts = {}) {
    const c = new Redis({ port: this.port, host: "127.0.0.1", ...opts });
    c.on("error", () => {});
    this.clients.push(c);
    return c;
  }

  alive() { return this.proc && this.proc.exitCode === null && this.proc.signalCode === null; }

  async kill9() {
    for (const c of this.clients) c.disconnect();
    if (this.alive()) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      process.kill(this.proc.pid, "SIGKILL");
      await exited;
    }
  }

  async stop() {
    for (const c of this.clients) c.disconnect();
    if (this.alive()) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      process.kill(this.proc.pid, "SIGTERM");
      const t = setTimeout(() => { if (this.alive()) process.kill(this.proc.pid, "SIGKILL"); }, 10000);
      await exited;
      clearTimeout(t);
    }
    live.delete(this);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Runs `body` while `server` is stopped with SIGSTOP (connected, answering nothing: as if
 * cut off), then SIGCONT. */
export async function whileStopped(server, body) {
  process.kill(server.proc.pid, "SIGSTOP");
  try {
    await body();
  } finally {
    process.kill(server.proc.pid, "SIGCONT");
  }
}

export async function startServer(opts) {
  return new Server(opts).start();
}

function parseInfo(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf(":");
    if (i > 0 && !line.startsWith("#")) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/** A Redis Cluster of `masters` primaries with `replicas` replicas each. */
export class TestCluster {
  constructor(masters = 3, replicas = 1) {
    this.masters = masters;
    this.replicas = replicas;
    this.nodes = [];
  }

  async start() {
    const taken = new Set();
    try {
      while (this.nodes.length < this.masters * (1 + this.replicas)) {
        const port = await freePort(true, taken);
        taken.add(port).add(port + 10000);
        const conf = ["--cluster-enabled", "yes", "--cluster-config-file", `nodes-${port}.conf`,
          "--cluster-node-timeout", 2000, "--repl-diskless-sync-delay", 0];
        this.nodes.push(await startServer({ conf, clusterBus: true, port }));
      }
      const p = spawnSync(cliBinary(), ["--cluster", "create", ...this.nodes.map((n) => n.addr),
        "--cluster-replicas", String(this.replicas), "--cluster-yes"], { timeout: 60000, encoding: "utf8" });
      if (p.status !== 0 || !p.stdout.includes("[OK] All 16384 slots covered")) {
        throw new Error(`cluster create failed: ${p.stdout}${p.stderr}`);
      }
      await this.waitOk();
      await this.waitReplicasSynced();
    } catch (e) {
      await this.stop();
      throw e;
    }
    return this;
  }

  alive() { return this.nodes.filter((n) => n.alive()); }

  async info(node, section) {
    const c = node.client({ maxRetriesPerRequest: 0, retryStrategy: null });
    try { return parseInfo(await (section === "cluster" ? c.cluster("INFO") : c.info(section))); }
    finally { c.disconnect(); }
  }

  async waitOk(timeoutMs = 30000) {
    await waitFor(async () => {
      for (const n of this.alive()) {
        const i = await this.info(n, "cluster");
        if (i.cluster_state !== "ok" || i.cluster_slots_ok !== "16384") return false;
      }
      return true;
    }, timeoutMs, "cluster_state ok on every live node", 100);
  }

  async waitReplicasSynced(timeoutMs = 30000) {
    await waitFor(async () => {
      for (const n of this.alive()) {
        const i = await this.info(n, "replication");
        if (i.role === "slave" && i.master_link_status !== "up") return false;
      }
      return true;
    }, timeoutMs, "replicas in sync", 100);
  }

  /** The live primary that serves `key`. */
  async owner(key) {
    const c = this.alive()[0].client();
    try {
      const slot = await c.cluster("KEYSLOT", key);
      for (const [from, to, [, port]] of await c.cluster("SLOTS")) {
        if (from <= slot && slot <= to) return this.nodes.find((n) => n.port === port);
      }
    } finally { c.disconnect(); }
    throw new Error(`no owner of ${key}`);
  }

  /** The live replicas of primary `node`. */
  async replicasOf(node) {
    const c = node.client();
    try {
      const id = await c.cluster("MYID");
      const lines = await c.cluster("REPLICAS", id);
      return lines.filter((l) => !/fail/.test(l.split(" ")[2]))
        .map((l) => this.nodes.find((n) => n.port === Number(l.split(" ")[1].split("@")[0].split(":")[1])));
    } finally { c.disconnect(); }
  }

  client(opts = {}) {
    const c = new Cluster([{ host: "127.0.0.1", port: this.alive()[0].port }], opts);
    c.on("error", () => {});
    return c;
  }

  async stop() {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}
