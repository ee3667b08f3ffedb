/** What the package shares: the client type, sending RMQ commands, argument checks,
 * reply conversion and retried calls. */

import { Cluster, Command, Redis, ReplyError } from "ioredis";
import { moduleMissing } from "./module_missing";
import { BOUNDS } from "./protocol";

/** Either ioredis client works: every RMQ command but TPOP names its queue as its only
 * key; TPOP is sent to each primary by the worker. */
export type Client = Redis | Cluster;
/** A message, group or slot basis: bytes, or a string (sent as UTF-8). */
export type Data = Buffer | Uint8Array | string;
export type Arg = string | number | Buffer;

/** Longest duration the module takes (RANGE, DELAY, LEASE, BLOCK, EXTEND), in ms. */
export const MAX_MS = BOUNDS.delay[1];

export function isCluster(client: Client): client is Cluster {
  return client instanceof Cluster;
}

/** A Cluster's name of one of its nodes, as its slot map (`cluster.slots`) has it. */
export function nodeKey(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

export function toBuffer(x: Data, what = "message"): Buffer {
  if (Buffer.isBuffer(x)) return x;
  if (typeof x === "string") return Buffer.from(x, "utf8");
  if (x instanceof Uint8Array) return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  throw new TypeError(`${what} must be a Buffer, Uint8Array or string, got ${typeof x}`);
}

/** Send one RMQ command about `key` (its queue), replies as Buffers (`buffers`) or
 * strings. ioredis knows the keys only of the commands in its own table, so a Cluster
 * would send a module command to any node and follow the MOVED (refreshing its whole slot
 * map each time): giving the command its key sends it straight to the queue's node. A
 * server without the module rejects with ModuleNotLoaded, which says how to load it. */
export function send(client: Client, name: string, key: string | null, args: Arg[],
                     buffers = false): Promise<unknown> {
  const cmd = new Command(name, args, { replyEncoding: buffers ? null : "utf8" });
  if (key !== null) (cmd as unknown as { keys: Arg[] }).keys = [key];
  return (client.sendCommand(cmd) as Promise<unknown>).catch((e: unknown) => { throw moduleMissing(e); });
}

export function int(name: string, value: unknown, low: number, high: number): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new TypeError(`${name} must be an integer, got ${String(value)}`);
  }
  if (value < low || value > high) {
    throw new RangeError(`${name} must be in [${exact(low)}, ${exact(high)}], got ${exact(value)}`);
  }
  return value;
}

/** An integer's every digit (String(2 ** 62) is 4611686018427388000), so that error
 * messages say the bounds as the other clients and the contract do. */
const exact = (n: number): string => (Number.isSafeInteger(n) ? String(n) : BigInt(n).toString());

/** An options object checked as Python checks keyword arguments: `undefined` is no
 * options, anything but a plain object is a TypeError, and so is an unknown name (a typo
 * such as `concurency` would otherwise be silently ignored). */
export function options<T extends object>(what: string, opts: unknown, known: readonly string[]): T {
  if (opts === undefined) return {} as T;
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new TypeError(`${what} options must be an object, got ${Array.isArray(opts) ? "an array" : String(opts)}`);
  }
  const unknown = Object.keys(opts).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw new TypeError(`unknown ${what} option${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} `
      + `(known: ${known.join(", ")})`);
  }
  return opts as T;
}

export function checkQueueName(name: unknown): string {
  if (typeof name !== "string" || !name || name.includes("{") || name.includes("}")) {
    throw new TypeError(`a queue name is a non-empty string without '{' or '}', got ${String(name)}`);
  }
  return name;
}

/** A map reply (a flat field/value array in RESP2, which ioredis speaks) as an object. */
export function asMap(reply: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const items = reply as unknown[];
  for (let i = 0; i + 1 < items.length; i += 2) out[String(items[i])] = items[i + 1];
  return out;
}

/** Server errors that a retry can cure (the cluster between states, a replica being
 * promoted); every error that is not a server reply (a lost connection) is one too. */
export function isTransient(e: unknown): boolean {
  if (!(e instanceof ReplyError)) return true;
  return /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|MOVED|ASK)\b/.test((e as Error).message);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Run `call`, retrying transient errors with exponential backoff (50, 200, 800 ms); the
 * last error is thrown once `attempts` are used up. */
export async function retrying<T>(call: () => Promise<T>, attempts = 4, delay = 50): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (e) {
      if (attempt >= attempts || !isTransient(e)) throw e;
      await sleep(delay);
      delay *= 4;
    }
  }
}

/** An unknown command: the server cannot serve this call at all (the module is missing or
 * older than the command). */
export function isUnknownCommand(e: unknown): boolean {
  return e instanceof ReplyError && /unknown command/i.test((e as Error).message);
}
