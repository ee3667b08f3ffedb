// Test servers for the gateway's JS tests: a redis-server with the module on a free port
// (its own temp dir, no persistence), stopped by pid; key checks through redis-cli.
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

export async function waitFor(pred, timeoutMs, what = "condition", interval = 20) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(interval);
  }
}

class Server {
  async start() {
    this.port = await freePort();
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "rmq-gw-js-"));
    const module = process.env.RMQ_MODULE || path.join(REPO, "target", "release", "librmq.so");
    const bin = process.env.RMQ_SERVER_BIN || process.env.REDIS_SERVER || "redis-server";
    this.proc = spawn(bin, ["--port", String(this.port), "--bind", "127.0.0.1", "--dir", this.dir, "--save", "",
      "--appendonly", "no", "--daemonize", "no", "--loadmodule", module], { cwd: this.dir, stdio: "ignore" });
    await waitFor(() => {
      if (this.proc.exitCode !== null) throw new Error(`redis-server exited (${this.proc.exitCode})`);
      try { return this.cli("PING") === "PONG"; } catch { return false; }
    }, 20000, "redis-server", 50);
    return this;
  }

  get addr() { return `127.0.0.1:${this.port}`; }

  cli(...args) {
    return execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(this.port), ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      process.kill(this.proc.pid, "SIGTERM");
      const t = setTimeout(() => { if (this.proc.exitCode === null) process.kill(this.proc.pid, "SIGKILL"); }, 10000);
      await exited;
      clearTimeout(t);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startServer() {
  return new Server().start();
}
