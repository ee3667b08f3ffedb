/** Durable mode: a push or an ACK that resolves only once replicas (and, asked, the AOFs)
 * hold it. Redis replicates asynchronously, so a write the primary acknowledged is lost if
 * the primary fails before a replica got it. In durable mode the write is followed, on the
 * same connection, by `WAIT n timeout` (or `WAITAOF 1 n timeout` with `aof`), which answers
 * once `n` replicas hold every write that connection made; fewer in time rejects with
 * NotDurable. On a Cluster both go to the connection of the primary serving the queue's
 * slot (WAIT has no key, so the Cluster itself would send it anywhere). */

import { Cluster, Redis, ReplyError } from "ioredis";
import { keySlot } from "./slot";
import { Arg, Client, int, isCluster, isTransient, nodeKey, options, send, sleep } from "./util";

export interface DurableOptions {
  /** replicas that must hold the write (1 to 1000) */
  replicas: number;
  /** how long to wait for them, ms (default 1000; 0, "forever" to WAIT, is refused) */
  timeoutMs?: number;
  /** WAITAOF: the primary's and the replicas' AOF hold it (Redis >= 7.2 or Valkey, with
   * appendonly yes) */
  aof?: boolean;
}

/** `durable:` as given: a replica count (0: none), or the full options. */
export type DurableOption = number | DurableOptions | undefined;

const POP_ADVICE = "its messages are not handed out (this primary may be stale); they stay in "
  + "flight here until their leases run out";
/** What the caller of each command should do about a NotDurable. */
const ADVICE: Record<string, string> = {
  "RMQ.PUSH": "retry (a retried push of the same content merges)",
  "RMQ.POP": POP_ADVICE,
  "RMQ.TPOP": POP_ADVICE,
};

/** The write is done on the primary, but fewer replicas than asked confirmed it in time: a
 * failover now could lose it. Retry the call: a retried push of the same content merges
 * with the stored copy (range: kept as it is; priority and fixed: its score set again), so
 * it adds nothing, except when the copy was consumed in between (the retry then queues the
 * content again) or the primary failed over without it (the retry then stores it). A
 * retried ACK of an acked message resolves false. A POP or TPOP that is not confirmed hands
 * out nothing: a primary cut off from its replicas may be stale. `replies`: the replies of the commands
 * before the wait (e.g. how many messages a push added). A ReplyError (the reply of WAIT
 * said so) that `retrying` does not repeat: repeating is the caller's choice. */
export class NotDurable extends ReplyError {
  constructor(what: string, readonly confirmed: number, readonly wanted: number,
              timeoutMs: number, aof: boolean, readonly replies: unknown[]) {
    super(`${what} is done on the primary but only ${confirmed} of ${wanted} replicas `
      + `${aof ? "wrote to their AOF" : "acknowledged"} it within ${timeoutMs} ms, so a failover `
      + `now could undo it: ${ADVICE[what] ?? "retry"}`);
  }

  // ReplyError's `name` is a getter
  get name(): string {
    return "NotDurable";
  }
}

export interface Durable {
  replicas: number;
  timeoutMs: number;
  aof: boolean;
}

/** The Durable a `durable:` option asks for, checked; null for none. */
export function durableFor(value: DurableOption): Durable | null {
  if (value === undefined || value === 0) return null;
  const opts: DurableOptions = typeof value === "number" ? { replicas: value }
    : options("durable", value, ["replicas", "timeoutMs", "aof"]);
  const durable = {
    replicas: int("durable replicas", opts.replicas, 1, 1000),
    timeoutMs: int("durable timeoutMs", opts.timeoutMs ?? 1000, 1, 2 ** 31),
    aof: opts.aof ?? false,
  };
  if (typeof durable.aof !== "boolean") throw new TypeError(`durable aof must be a boolean, got ${durable.aof}`);
  return durable;
}

/** One command of a durable call, sent with `send`: `key` is its queue (null: keyless,
 * TPOP), `buffers` for replies as Buffers. */
export interface Call {
  name: string;
  key: string | null;
  args: Arg[];
  buffers?: boolean;
}

/** Resolves to the replies of `calls` (sent at once, pipelined) after, when `durable`, a
 * WAIT behind them on the same connection confirms enough replicas; else rejects with
 * NotDurable. On a Cluster each queue's commands and their WAIT go to its slot's primary. */
export async function durably(client: Client, durable: Durable | null, what: string,
                              calls: Call[]): Promise<unknown[]> {
  if (!durable) return Promise.all(calls.map((c) => send(client, c.name, c.key, c.args, c.buffers)));
  if (isCluster(client)) return onOwners(client, durable, what, calls);
  const [done, waited] = await waitOn(client, durable, calls);
  const failed = [...done, waited].find((d): d is PromiseRejectedResult => d.status === "rejected");
  if (failed) throw failed.reason;
  const confirmed = confirmedBy(durable, (waited as PromiseFulfilledResult<unknown>).value);
  const replies = done.map((d) => (d as PromiseFulfilledResult<unknown>).value);
  if (confirmed < durable.replicas) {
    throw new NotDurable(what, confirmed, durable.replicas, durable.timeoutMs, durable.aof, replies);
  }
  return replies;
}

type Settled = PromiseSettledResult<unknown>;

/** `calls` and a WAIT right behind them on `conn`: how each call ended, and how the WAIT did. */
async function waitOn(conn: Redis, durable: Durable, calls: Call[]): Promise<[Settled[], Settled]> {
  const sends = calls.map((c) => send(conn, c.name, c.key, c.args, c.buffers));
  const args: Arg[] = durable.aof ? [1, durable.replicas, durable.timeoutMs] : [durable.replicas, durable.timeoutMs];
  const wait = conn.call(durable.aof ? "WAITAOF" : "WAIT", ...args);
  const [done, [waited]] = await Promise.all([Promise.allSettled(sends), Promise.allSettled([wait])]);
  return [done, waited];
}

/** How many replicas a WAIT (WAITAOF) reply confirms. */
function confirmedBy(durable: Durable, waited: unknown): number {
  if (!durable.aof) return Number(waited);
  const [local, reps] = waited as [number, number];
  // without the primary's own AOF write no copy is safe yet
  return Number(local) < 1 ? 0 : Number(reps);
}

/** Attempts of a Cluster call whose commands a node refused (MOVED after a failover or a
 * slot move, CLUSTERDOWN, TRYAGAIN: not done there), each after the slot map is read again. */
const CLUSTER_ATTEMPTS = 5;

/** `durably` on a Cluster: the calls grouped by the primary serving their queue's slot,
 * each group and its WAIT on that node's connection. A call a node refused is sent again
 * once the slot map is read again; a lost connection (the call may have been done) is
 * thrown as it is, after the slot map is read again, for the caller to retry. */
async function onOwners(cluster: Cluster, durable: Durable, what: string, calls: Call[]): Promise<unknown[]> {
  const replies: unknown[] = new Array(calls.length);
  let confirmed = durable.replicas;   // the fewest that any node confirmed
  let pending = calls.map((_, i) => i);
  for (let attempt = 1; pending.length; attempt++) {
    const again: number[] = [];
    let error: unknown;
    await Promise.all([...(await byOwner(cluster, calls, pending))].map(async ([node, group]) => {
      if (!node) {                    // the slot map names no known primary (yet)
        if (attempt < CLUSTER_ATTEMPTS) again.push(...group);
        else error ??= new Error(`no known primary serves the slot of ${calls[group[0]].key}; retry`);
        return;
      }
      const [done, waited] = await waitOn(node, durable, group.map((i) => calls[i]));
      // The WAIT matters once something was written (a node that redirected every call
      // may be a replica now, which refuses WAIT).
      if (done.some((d) => d.status === "fulfilled")) {
        if (waited.status === "rejected") error ??= waited.reason;
        else confirmed = Math.min(confirmed, confirmedBy(durable, waited.value));
      }
      done.forEach((d, j) => {
        if (d.status === "fulfilled") replies[group[j]] = d.value;
        else if (d.reason instanceof ReplyError && isTransient(d.reason) && attempt < CLUSTER_ATTEMPTS) again.push(group[j]);
        else error ??= d.reason;
      });
    }));
    if (error !== undefined || again.length) await refreshSlots(cluster);
    if (error !== undefined) throw error;
    if (again.length) await sleep(50 * attempt);
    pending = again;
  }
  if (confirmed < durable.replicas) {
    throw new NotDurable(what, confirmed, durable.replicas, durable.timeoutMs, durable.aof, replies);
  }
  return replies;
}

/** The indices of `pending` calls by the primary serving their queue (undefined: none known). */
async function byOwner(cluster: Cluster, calls: Call[], pending: number[]): Promise<Map<Redis | undefined, number[]>> {
  if (!cluster.slots.length) {
    // a failed connect reaches delayUntilReady's callback
    if (cluster.status === "wait") cluster.connect().catch(() => {});
    await new Promise<void>((resolve, reject) => cluster.delayUntilReady((e) => (e ? reject(e) : resolve())));
  }
  const primaries = new Map(cluster.nodes("master").map((n) => [nodeKey(n), n]));
  const out = new Map<Redis | undefined, number[]>();
  for (const i of pending) {
    const key = calls[i].key;
    if (key === null) throw new TypeError(`durable ${calls[i].name} on a Cluster needs a primary's connection (\`via\`)`);
    const owner = cluster.slots[keySlot(Buffer.from(key))]?.[0];
    const node = owner === undefined ? undefined : primaries.get(owner);
    const group = out.get(node);
    if (group) group.push(i);
    else out.set(node, [i]);
  }
  return out;
}

function refreshSlots(cluster: Cluster): Promise<void> {
  return new Promise((resolve) => cluster.refreshSlotsCache(() => resolve()));
}
