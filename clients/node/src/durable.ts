/** Durable mode: a push or an ACK that resolves only once replicas (and, asked, the AOFs)
 * hold it. Redis replicates asynchronously, so a write the primary acknowledged is lost if
 * the primary fails before a replica got it. In durable mode the write is followed, on the
 * same connection, by `WAIT n timeout` (or `WAITAOF 1 n timeout` with `aof`), which answers
 * once `n` replicas hold every write that connection made; fewer in time rejects with
 * NotDurable. */

import { ReplyError } from "ioredis";
import { Arg, Client, int, isCluster, options } from "./util";

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
export function durableFor(client: Client, value: DurableOption): Durable | null {
  if (value === undefined || value === 0) return null;
  const opts: DurableOptions = typeof value === "number" ? { replicas: value }
    : options("durable", value, ["replicas", "timeoutMs", "aof"]);
  const durable = {
    replicas: int("durable replicas", opts.replicas, 1, 1000),
    timeoutMs: int("durable timeoutMs", opts.timeoutMs ?? 1000, 1, 2 ** 31),
    aof: opts.aof ?? false,
  };
  if (typeof durable.aof !== "boolean") throw new TypeError(`durable aof must be a boolean, got ${durable.aof}`);
  // WAIT counts the replicas of one node after one connection's writes; a Cluster sends
  // each queue's commands to its own node.
  if (isCluster(client)) throw new TypeError("durable mode needs a Redis client (a primary), not a Cluster");
  return durable;
}

/** Resolves to the replies of `sends` (commands just issued on `client`, none awaited yet),
 * after, when `durable`, a WAIT issued right behind them on the same connection confirms
 * enough replicas; else rejects with NotDurable. */
export async function durably(client: Client, durable: Durable | null, what: string,
                              sends: Promise<unknown>[]): Promise<unknown[]> {
  if (!durable) return Promise.all(sends);
  const args: Arg[] = durable.aof ? [1, durable.replicas, durable.timeoutMs] : [durable.replicas, durable.timeoutMs];
  const wait = client.call(durable.aof ? "WAITAOF" : "WAIT", ...args);
  const [done, waited] = await Promise.all([Promise.allSettled(sends), wait]);
  const failed = done.find((d): d is PromiseRejectedResult => d.status === "rejected");
  if (failed) throw failed.reason;
  const replies = done.map((d) => (d as PromiseFulfilledResult<unknown>).value);
  let confirmed: number;
  if (durable.aof) {
    const [local, reps] = waited as [number, number];
    // without the primary's own AOF write no copy is safe yet
    confirmed = Number(local) < 1 ? 0 : Number(reps);
  } else {
    confirmed = Number(waited);
  }
  if (confirmed < durable.replicas) {
    throw new NotDurable(what, confirmed, durable.replicas, durable.timeoutMs, durable.aof, replies);
  }
  return replies;
}
