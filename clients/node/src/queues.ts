/** Queues and topics: routing, pushes, pops, RMQ.INFO, RMQ.POLICY (pause) and
 * RMQ.SCHEDULE. */

import { crc32 } from "./crc32";
import { Durable, DurableOption, durableFor, durably } from "./durable";
import { Message } from "./message";
import { BOUNDS, POLICY_FIELDS } from "./protocol";
import {
  Arg, Client, Data, asMap, checkQueueName, int, options, send, toBuffer,
} from "./util";

export interface Policy {
  retries?: number;
  leaseMs?: number;
  maxQueueLength?: number;
  backoffMs?: number;
  backoffMaxMs?: number;
  rate?: number;
  rateWindowMs?: number;
  /** 1 (or true): POP and TPOP deliver nothing from the queue (see pause()) */
  paused?: number | boolean;
  /** events the queue's journal keeps (journal{Q}, read by trace()); 0: no journal */
  journal?: number;
}

/** The push mode: exactly one of `range`, `priority`, `at`, `delay` (all ms but
 * priority). */
export interface Mode {
  /** range-merge: due `range` ms after the first push; duplicates keep that due time */
  range?: number;
  /** priority queue: highest first; a duplicate replaces the priority */
  priority?: number;
  /** due at this Unix ms time; a duplicate replaces it */
  at?: number;
  /** due `delay` ms from now; a duplicate replaces it (a debounce) */
  delay?: number;
}

export interface PushOptions extends Mode {
  /** every message in this group: consumed one at a time, in order */
  group?: Data;
  /** this push's durable mode, instead of the queue's (0: none) */
  durable?: DurableOption;
}

export interface TargetOptions {
  /** durable mode of the pushes and of the ACKs of messages taken from it: a replica count
   * or DurableOptions; too few replicas confirming in time rejects with NotDurable */
  durable?: DurableOption;
}

export interface TopicPushOptions extends PushOptions {
  /** the slot basis (default: the group, else each message itself) */
  basis?: Data;
}

export interface PopOptions {
  /** most messages to take (default 1) */
  count?: number;
  /** this pop's durable mode, instead of the queue's (0: none): too few replicas confirming
   * the POP rejects with NotDurable instead of handing out what may be a stale primary's
   * messages (they stay in flight there until their leases run out) */
  durable?: DurableOption;
  /** lease of each (default: the queue's lease-ms) */
  leaseMs?: number;
  /** wait up to this many ms for a message (0 = forever); default: do not wait */
  blockMs?: number;
}

export interface TopicPopOptions extends PopOptions {
  /** messages per queue per turn (RMQ.TPOP QUANTUM); sent only when given */
  quantum?: number;
}

/** A schedule's mode is one of the push modes but `at` (a repeating push has no fixed
 * due time). */
export interface ScheduleOptions extends Omit<Mode, "at"> {
  /** fire every `every` ms (from `start`, default now + every) */
  every?: number;
  /** or on a crontab expression (5 fields, or 6 with seconds first) */
  cron?: string;
  /** the IANA zone of `cron` (default UTC) */
  tz?: string;
  /** first and last firing times, Unix ms */
  start?: number;
  end?: number;
  /** fire at most this many times */
  times?: number;
  group?: Data;
  /** Topic only: the slot basis that picks the queue (default: the group, else the
   * message) */
  basis?: Data;
}

export interface ScheduleEntry {
  queue: string;
  name: string;
  /** the SET arguments after the name, as one string */
  spec: string;
  /** next firing time (Unix ms), null when none is left */
  next: number | null;
  fired: number;
  /** last firing time, or null */
  last: number | null;
}

export type Info = Record<string, string | number | null>;

/** RMQ.INFO fields that a topic's info picks one of (instead of adding them up): the
 * earliest time, the largest lag. */
const INFO_PICK: Record<string, (a: number, b: number) => number> = {
  next_due: Math.min, next_expiry: Math.min, lag_ms: Math.max,
};

/** A topic's slot count: a power of two from 1 to 16384. */
export function checkSlots(slots: unknown): number {
  const n = int("slots", slots, ...BOUNDS.slots);
  if (n & (n - 1)) throw new RangeError(`slots must be a power of two, got ${n}`);
  return n;
}

/** The queue of `topic` that `basis` goes to, as RMQ.ROUTE computes it:
 * `<topic>_<crc32(basis) mod slots>` (zlib's CRC-32). */
export function route(topic: string, slots: number, basis: Data): string {
  return `${topic}_${crc32(toBuffer(basis, "basis")) % checkSlots(slots)}`;
}

const PUSH_MODES = ["range", "priority", "at", "delay"] as const;
const SCHEDULE_MODES = ["range", "priority", "delay"] as const;

/** The option names each call takes (anything else is refused, as Python refuses an
 * unknown keyword). */
const PUSH_OPTIONS = [...PUSH_MODES, "group", "durable"];
const TOPIC_PUSH_OPTIONS = [...PUSH_OPTIONS, "basis"];
const POP_OPTIONS = ["count", "leaseMs", "blockMs", "durable"];
const TOPIC_POP_OPTIONS = [...POP_OPTIONS, "quantum"];
const SCHEDULE_OPTIONS = ["every", "cron", "tz", "start", "end", "times", ...SCHEDULE_MODES, "group"];
const TOPIC_SCHEDULE_OPTIONS = [...SCHEDULE_OPTIONS, "basis"];

/** The mode arguments of a push (`what` "push") or a schedule: exactly one of `modes`. */
function modeArgs(what: string, mode: Mode, modes: readonly (keyof Mode)[]): Arg[] {
  const given = modes.filter((k) => mode[k] !== undefined);
  if (given.length !== 1) {
    throw new TypeError(`a ${what} needs exactly one of ${modes.join(", ")} (got ${given.join(", ") || "none"})`);
  }
  const name = given[0];
  const [low, high] = BOUNDS[name];
  return [name.toUpperCase(), int(name, mode[name], low, high)];
}

/** `b` if its length is within `bounds` (a group, a schedule name). */
function byteLength(what: string, b: Buffer, [low, high]: readonly [number, number]): Buffer {
  if (b.length < low || b.length > high) throw new RangeError(`${what} must be ${low} to ${high} bytes, got ${b.length}`);
  return b;
}

function messageList(messages: Data | Data[]): Buffer[] {
  const list = Array.isArray(messages) ? messages : [messages];
  if (!list.length) throw new TypeError("a push needs at least one message");
  const out = list.map((m) => toBuffer(m));
  if (out.some((m) => !m.length)) throw new TypeError("a message must not be empty");
  return out;
}

function groupBuffer(group: Data | undefined): Buffer | undefined {
  if (group === undefined) return undefined;
  return byteLength("group", toBuffer(group, "group"), BOUNDS.groupBytes);
}

/** The RMQ.PUSH argument lists for one queue. `MESSAGES` ends its options, so every
 * message, however it is spelt (`group`, `MESSAGES`, ...), arrives as a message. */
function pushArgs(queue: string, mode: Arg[], group: Buffer | undefined, messages: Buffer[]): Arg[][] {
  const options: Arg[] = group === undefined ? [] : ["GROUP", group];
  return [[queue, ...mode, ...options, "MESSAGES", ...messages]];
}

function policyArgs(policy: Policy): Arg[] {
  const entries = Object.entries(policy).filter(([, v]) => v !== undefined);
  if (!entries.length) throw new TypeError("setPolicy needs at least one field");
  const args: Arg[] = [];
  for (const [name, raw] of entries) {
    const bounds = Object.prototype.hasOwnProperty.call(POLICY_FIELDS, name) ? POLICY_FIELDS[name] : undefined;
    if (!bounds) {
      throw new TypeError(`unknown policy field ${name} (known: ${Object.keys(POLICY_FIELDS).join(", ")})`);
    }
    const value = typeof raw === "boolean" ? Number(raw) : raw;
    args.push(name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), int(name, value, ...bounds));
  }
  return args;
}

/** RMQ.POLICY GET's reply with camelCase names (`lease-ms` → `leaseMs`). */
function policyObject(reply: unknown): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(asMap(reply))) {
    out[k.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())] = Number(v);
  }
  return out;
}

function infoObject(reply: unknown): Info {
  const out: Info = {};
  for (const [k, v] of Object.entries(asMap(reply))) {
    out[k] = v === null || typeof v === "number" ? v : String(v);
  }
  return out;
}

function scheduleArgs(name: string, message: Data, opts: ScheduleOptions): Arg[] {
  if (typeof name !== "string") throw new TypeError("a schedule's name is a string");
  const args: Arg[] = ["SET", byteLength("name", Buffer.from(name, "utf8"), BOUNDS.scheduleNameBytes)];
  if ((opts.every === undefined) === (opts.cron === undefined)) {
    throw new TypeError("a schedule needs exactly one of every, cron");
  }
  if (opts.every !== undefined) args.push("EVERY", int("every", opts.every, ...BOUNDS.every));
  else args.push("CRON", String(opts.cron));
  if (opts.tz !== undefined) {
    if (opts.cron === undefined) throw new TypeError("tz goes with cron");
    args.push("TZ", opts.tz);
  }
  if (opts.start !== undefined) args.push("START", int("start", opts.start, ...BOUNDS.start));
  if (opts.end !== undefined) args.push("END", int("end", opts.end, ...BOUNDS.end));
  if (opts.times !== undefined) args.push("TIMES", int("times", opts.times, ...BOUNDS.times));
  args.push(...modeArgs("schedule", opts, SCHEDULE_MODES));
  const group = groupBuffer(opts.group);
  if (group !== undefined) args.push("GROUP", group);
  args.push("MESSAGES", messageList(message)[0]);
  return args;
}

function scheduleEntries(queue: string, reply: unknown): ScheduleEntry[] {
  return ((reply as unknown[][]) || []).map(([name, spec, next, fired, last]) => ({
    queue, name: String(name), spec: String(spec),
    next: next === null ? null : Number(next), fired: Number(fired),
    last: last === null ? null : Number(last),
  }));
}

function lease(opts: PopOptions): Arg[] {
  const args: Arg[] = ["COUNT", int("count", opts.count ?? 1, ...BOUNDS.count)];
  if (opts.leaseMs !== undefined) args.push("LEASE", int("leaseMs", opts.leaseMs, ...BOUNDS.leaseMs));
  if (opts.blockMs !== undefined) args.push("BLOCK", int("blockMs", opts.blockMs, ...BOUNDS.blockMs));
  return args;
}

/** What Queue and Topic share: a client and the queue names they cover. */
abstract class Target {
  readonly queues: string[];
  readonly durable: Durable | null;

  protected constructor(readonly client: Client, readonly name: string, queues: string[],
                        opts: TargetOptions) {
    this.queues = queues;
    this.durable = durableFor(options<TargetOptions>("queue", opts, ["durable"]).durable);
  }

  /** RMQ.INFO of each queue. */
  async infoByQueue(): Promise<Record<string, Info>> {
    const replies = await this.onEach((q) => ["RMQ.INFO", [q]]);
    return Object.fromEntries(this.queues.map((q, i) => [q, infoObject(replies[i])]));
  }

  /** RMQ.POLICY Q SET on every queue, e.g. `setPolicy({ retries: 5, backoffMs: 1000 })`;
   * names and bounds are checked before anything is sent. */
  async setPolicy(policy: Policy): Promise<void> {
    const args = policyArgs(policy);
    await this.onEach((q) => ["RMQ.POLICY", [q, "SET", ...args]]);
  }

  /** RMQ.POLICY Q RESET on every queue; resolves to how many had a policy. */
  async resetPolicy(): Promise<number> {
    const replies = await this.onEach((q) => ["RMQ.POLICY", [q, "RESET"]]);
    return replies.reduce((a: number, r) => a + Number(r), 0);
  }

  /** Stop deliveries (RMQ.POLICY Q SET paused 1): pushes, ACK, NACK and leases go on;
   * blocked consumers wait until resume(). */
  pause(): Promise<void> {
    return this.setPolicy({ paused: 1 });
  }

  resume(): Promise<void> {
    return this.setPolicy({ paused: 0 });
  }

  /** RMQ.SCHEDULE LIST of every queue. */
  async schedules(): Promise<ScheduleEntry[]> {
    const replies = await this.onEach((q) => ["RMQ.SCHEDULE", [q, "LIST"]]);
    return this.queues.flatMap((q, i) => scheduleEntries(q, replies[i]));
  }

  /** RMQ.SCHEDULE DEL on every queue; resolves to how many of the names existed. */
  async unschedule(...names: string[]): Promise<number> {
    if (!names.length) throw new TypeError("unschedule needs at least one name");
    const replies = await this.onEach((q) => ["RMQ.SCHEDULE", [q, "DEL", ...names]]);
    return replies.reduce((a: number, r) => a + Number(r), 0);
  }

  /** RMQ.REPLAY on every queue: dead messages back to waiting (at most `count` per queue);
   * resolves to how many. */
  async replay(count?: number): Promise<number> {
    const extra: Arg[] = count === undefined ? [] : ["COUNT", int("count", count, ...BOUNDS.replayCount)];
    const replies = await this.onEach((q) => ["RMQ.REPLAY", [q, ...extra]]);
    return replies.reduce((a: number, r) => a + Number(r), 0);
  }

  /** RMQ.PURGE on every queue: every waiting and in-flight message goes (and, with
   * `dead`, the dead ones); policy, schedules, sequence and deduplication stay. Resolves
   * to how many messages were removed. */
  async purge(opts: { dead?: boolean } = {}): Promise<number> {
    const extra: Arg[] = opts.dead ? ["DEAD"] : [];
    const replies = await this.onEach((q) => ["RMQ.PURGE", [q, ...extra]]);
    return replies.reduce((a: number, r) => a + Number(r), 0);
  }

  /** RMQ.DROP on every queue: each goes with every key the module keeps for it
   * (messages, policy, schedules, sequence, deduplication, journal). Resolves to how many
   * of the queues existed. */
  async drop(): Promise<number> {
    const replies = await this.onEach((q) => ["RMQ.DROP", [q]]);
    return replies.reduce((a: number, r) => a + Number(r), 0);
  }

  /** A command on every queue at once (pipelined on the connection; on a Cluster each goes
   * to its queue's node). */
  protected onEach(command: (queue: string) => [string, Arg[]]): Promise<unknown[]> {
    return Promise.all(this.queues.map((q) => {
      const [name, args] = command(q);
      return send(this.client, name, q, args);
    }));
  }

  /** A POP or TPOP on `via`; durable (this call's mode, else the queue's), the WAIT right
   * behind it on the same connection. */
  protected async popOn(via: Client, durable: DurableOption, name: string, key: string | null, args: Arg[]): Promise<unknown> {
    const wait = durable === undefined ? this.durable : durableFor(durable);
    return (await durably(via, wait, name, [{ name, key, args, buffers: true }]))[0];
  }

  protected async pushAll(byQueue: Map<string, Buffer[]>, mode: Arg[], group: Buffer | undefined,
                          durable: DurableOption): Promise<number> {
    const wait = durable === undefined ? this.durable : durableFor(durable);
    const calls = [...byQueue].flatMap(([q, msgs]) =>
      pushArgs(q, mode, group, msgs).map((args) => ({ name: "RMQ.PUSH", key: q, args })));
    return (await durably(this.client, wait, "RMQ.PUSH", calls)).reduce((a: number, r) => a + Number(r), 0);
  }
}

/** One queue: `new Queue(redis, "prices_3")`; `{ durable: 1 }` makes its pushes and acks
 * durable. */
export class Queue extends Target {
  constructor(client: Client, name: string, opts: TargetOptions = {}) {
    super(client, checkQueueName(name), [name], opts);
  }

  /** RMQ.PUSH: one mode (`range`, `priority`, `at` or `delay`); `group` puts every
   * message in that group. Resolves to how many were newly added (the others merged into a
   * waiting copy). Bad arguments throw before anything is sent. */
  async push(messages: Data | Data[], opts: PushOptions): Promise<number> {
    opts = options("push", opts, PUSH_OPTIONS);
    const mode = modeArgs("push", opts, PUSH_MODES);
    const group = groupBuffer(opts.group);
    return this.pushAll(new Map([[this.name, messageList(messages)]]), mode, group, opts.durable);
  }

  /** RMQ.POP: up to `count` messages, each in flight under a lease; every one must then be
   * acked or nacked (or it comes back when its lease runs out). */
  async pop(opts: PopOptions = {}, via: Client = this.client): Promise<Message[]> {
    opts = options("pop", opts, POP_OPTIONS);
    const args = [this.name, ...lease(opts)];
    const start = Date.now();
    const reply = (await this.popOn(via, opts.durable, "RMQ.POP", this.name, args)) as [Buffer, number][] | null;
    const end = opts.leaseMs === undefined ? null : start + opts.leaseMs;
    return (reply || []).map(([m, d]) => new Message(this.client, this.name, m, Number(d), end, this.durable));
  }

  async info(): Promise<Info> {
    return (await this.infoByQueue())[this.name];
  }

  /** RMQ.POLICY GET: every field's effective value (camelCase names). */
  async policy(): Promise<Record<string, number>> {
    return policyObject(await send(this.client, "RMQ.POLICY", this.name, [this.name, "GET"]));
  }

  /** RMQ.TRACE: what happened to `message`, from the queue's journal (kept while its policy
   * sets `journal`, e.g. `setPolicy({ journal: 10000 })`): its events, newest first, at most
   * `opts.count` (default 100), each `[entryId, { field: value }]` with the fields event, message,
   * [sha1,] deliveries, by[, id][, due | priority] (values as Buffers). */
  async trace(message: Data, opts: { count?: number } = {}): Promise<[string, Record<string, Buffer>][]> {
    const { count } = options<{ count?: number }>("trace", opts, ["count"]);
    const args: Arg[] = [this.name, toBuffer(message)];
    if (count !== undefined) args.push("COUNT", int("count", count, 1, 1_000_000));
    const reply = (await send(this.client, "RMQ.TRACE", this.name, args)) as [Buffer, Buffer[]][];
    return reply.map(([id, flat]) => {
      const fields: Record<string, Buffer> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i].toString()] = flat[i + 1];
      return [id.toString(), fields];
    });
  }

  /** RMQ.SCHEDULE SET: the server pushes `message` at every firing time. Resolves to the
   * first firing time (Unix ms). */
  async schedule(name: string, message: Data, opts: ScheduleOptions): Promise<number> {
    const args = scheduleArgs(name, message, options("schedule", opts, SCHEDULE_OPTIONS));
    return Number(await send(this.client, "RMQ.SCHEDULE", this.name, [this.name, ...args]));
  }

  toString(): string {
    return `Queue(${this.name})`;
  }
}

/** A topic of `slots` queues `<name>_0 … <name>_<slots-1>`:
 * `new Topic(redis, "orders", 16)`. */
export class Topic extends Target {
  readonly slots: number;

  constructor(client: Client, name: string, slots: number, opts: TargetOptions = {}) {
    checkQueueName(name);
    const n = checkSlots(slots);
    super(client, name, Array.from({ length: n }, (_, i) => `${name}_${i}`), opts);
    this.slots = n;
  }

  /** The queue that `basis` routes to (RMQ.ROUTE, computed locally). */
  queueFor(basis: Data): string {
    return route(this.name, this.slots, basis);
  }

  /** RMQ.PUSH into the topic. Routing: by `basis` when given; else by `group` (so a group
   * stays in one queue and is consumed serially); else each message by its own content,
   * one PUSH per queue (atomic per queue, not across queues). */
  async push(messages: Data | Data[], opts: TopicPushOptions): Promise<number> {
    opts = options("push", opts, TOPIC_PUSH_OPTIONS);
    const mode = modeArgs("push", opts, PUSH_MODES);
    const group = groupBuffer(opts.group);
    const key = opts.basis !== undefined ? toBuffer(opts.basis, "basis") : group;
    const byQueue = new Map<string, Buffer[]>();
    for (const m of messageList(messages)) {
      const q = this.queueFor(key ?? m);
      const list = byQueue.get(q);
      if (list) list.push(m);
      else byQueue.set(q, [m]);
    }
    return this.pushAll(byQueue, mode, group, opts.durable);
  }

  /** RMQ.TPOP on one server: up to `count` messages from any of the topic's queues it
   * holds, round-robin. `via` is the connection to send it on (on a Cluster, one to a
   * primary: TPOP takes only from the queues that node serves). */
  async pop(opts: TopicPopOptions = {}, via: Client = this.client): Promise<Message[]> {
    opts = options("pop", opts, TOPIC_POP_OPTIONS);
    const args: Arg[] = [this.name, this.slots, ...lease(opts)];
    if (opts.quantum !== undefined) args.push("QUANTUM", int("quantum", opts.quantum, ...BOUNDS.quantum));
    const start = Date.now();
    const reply = (await this.popOn(via, opts.durable, "RMQ.TPOP", null, args)) as [Buffer, Buffer, number][] | null;
    const end = opts.leaseMs === undefined ? null : start + opts.leaseMs;
    return (reply || []).map(([q, m, d]) => new Message(this.client, q.toString(), m, Number(d), end, this.durable));
  }

  /** RMQ.INFO summed over the slots as Python's Topic.info sums it: counts added up
   * (`paused`: how many are), next_due / next_expiry the earliest, lag_ms the largest (the
   * topic lags as much as its most behind queue), `kinds` the distinct kinds in use. */
  async info(): Promise<Record<string, number | null | string[]>> {
    const total: Record<string, number | null | string[]> = {};
    const kinds = new Set<string>();
    for (const info of Object.values(await this.infoByQueue())) {
      for (const [k, v] of Object.entries(info)) {
        const pick = INFO_PICK[k];
        if (k === "kind") {
          if (v !== null) kinds.add(String(v));
        } else if (pick) {
          const prev = total[k] as number | null | undefined;
          total[k] = v === null ? prev ?? null : prev == null ? Number(v) : pick(prev, Number(v));
        } else if (typeof v === "number") {
          total[k] = ((total[k] as number | undefined) ?? 0) + v;
        }
      }
    }
    total.kinds = [...kinds].sort();
    return total;
  }

  /** RMQ.POLICY GET of every queue: {queue: {field: value}}. */
  async policy(): Promise<Record<string, Record<string, number>>> {
    const replies = await this.onEach((q) => ["RMQ.POLICY", [q, "GET"]]);
    return Object.fromEntries(this.queues.map((q, i) => [q, policyObject(replies[i])]));
  }

  /** RMQ.SCHEDULE SET on the queue that `basis` (else the group, else the message) routes
   * to. Resolves to the first firing time (Unix ms). */
  async schedule(name: string, message: Data, opts: ScheduleOptions): Promise<number> {
    opts = options("schedule", opts, TOPIC_SCHEDULE_OPTIONS);
    const args = scheduleArgs(name, message, opts);
    const q = this.queueFor(opts.basis ?? opts.group ?? message);
    return Number(await send(this.client, "RMQ.SCHEDULE", q, [q, ...args]));
  }

  toString(): string {
    return `Topic(${this.name}, ${this.slots})`;
  }
}
