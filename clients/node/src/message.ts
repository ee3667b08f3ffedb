/** A delivered message and the errors a handler throws. */

import { BOUNDS } from "./protocol";
import { Durable, DurableOption, durableFor, durably } from "./durable";
import { Arg, Client, int, options, retrying, send } from "./util";

/** Thrown by a handler to send its message straight to dead (`RMQ.NACK … DEAD`) instead
 * of back to waiting. */
export class Dead extends Error {
  constructor(message?: string) {
    super(message);
    this.name = "Dead";
  }
}

/** ack() or nack() called on a message that was already acked or nacked. */
export class AlreadySettled extends Error {
  constructor(message?: string) {
    super(message);
    this.name = "AlreadySettled";
  }
}

export interface NackOptions {
  /** back to waiting after this many ms (default: the queue's retry backoff) */
  delayMs?: number;
  /** straight to dead */
  dead?: boolean;
}

/**
 * One delivery of a message, taken by RMQ.POP or RMQ.TPOP and now in flight: `body`
 * (Buffer), `queue` (the queue it came from), `deliveries` (1 on the first delivery).
 * `extend(ms)` moves its lease. `ack()` or `nack()` settles it, once: under a Worker the
 * worker does it (ACK when the handler resolves, NACK when it throws), so a handler calls
 * them only to settle early; a second call throws AlreadySettled. `signal` is aborted when
 * the worker gives up on the handler (max runtime, or the end of a stop's grace).
 */
export class Message {
  /** Date.now() by which the lease runs out, as far as this process knows (null: unknown
   * or no longer in flight). */
  leaseEnd: number | null;
  private settledFlag = false;
  // Made on first use of `signal` (most handlers never look at it).
  private abort?: AbortController;
  private abortReason?: Error;

  constructor(private readonly client: Client, readonly queue: string, readonly body: Buffer,
              readonly deliveries: number, leaseEnd: number | null = null,
              private readonly durable: Durable | null = null) {
    this.leaseEnd = leaseEnd;
  }

  get settled(): boolean {
    return this.settledFlag;
  }

  get signal(): AbortSignal {
    if (!this.abort) {
      this.abort = new AbortController();
      if (this.abortReason) this.abort.abort(this.abortReason);
    }
    return this.abort.signal;
  }

  toString(): string {
    const text = this.body.length <= 80 ? this.body.toString() : `${this.body.subarray(0, 77).toString()}...`;
    return `Message(${this.queue}, ${JSON.stringify(text)}, deliveries=${this.deliveries})`;
  }

  /** RMQ.EXTEND: the lease now ends `ms` from now. Resolves to the new deadline (server
   * Unix ms), or null when the message is no longer in flight (its lease ran out). */
  async extend(ms: number): Promise<number | null> {
    int("extend ms", ms, ...BOUNDS.extendMs);
    const start = Date.now();
    const reply = (await send(this.client, "RMQ.EXTEND", this.queue, [this.queue, this.body, ms])) as number | null;
    this.leaseEnd = reply === null ? null : start + ms;
    return reply;
  }

  /** RMQ.ACK: true if it was still in flight, false if the ack came too late (the lease had
   * run out and the message went back to waiting). In durable mode (its queue's, or
   * `durable` here; 0: none) it rejects with NotDurable when too few replicas confirm the
   * ACK: done on the primary, but a failover may deliver the message again. */
  async ack(opts: { durable?: DurableOption } = {}): Promise<boolean> {
    const { durable } = options<{ durable?: DurableOption }>("ack", opts, ["durable"]);
    const wait = durable === undefined ? this.durable : durableFor(durable);
    this.claimOrThrow();
    return this.sendAck(wait);
  }

  /** RMQ.NACK: back to waiting (after `delayMs`, else the queue's retry backoff), or to dead
   * with `dead: true` or once its retries are used up. Resolves to "requeued", "dead", or
   * null if it was no longer in flight. */
  async nack(opts: NackOptions = {}): Promise<"requeued" | "dead" | null> {
    opts = options("nack", opts, ["delayMs", "dead"]);
    if (opts.delayMs !== undefined) int("nack delayMs", opts.delayMs, ...BOUNDS.delay);
    this.claimOrThrow();
    return this.sendNack(opts);
  }

  // -- used by the Worker -------------------------------------------------------------

  /** @internal Take the right to settle this delivery; false if someone already has. */
  claim(): boolean {
    if (this.settledFlag) return false;
    this.settledFlag = true;
    return true;
  }

  /** @internal */
  giveUp(reason: string): void {
    this.abortReason = new Error(reason);
    this.abort?.abort(this.abortReason);
  }

  /** @internal */
  async sendAck(durable: Durable | null = this.durable): Promise<boolean> {
    const [acked] = await retrying(() => durably(this.client, durable, "RMQ.ACK",
      [{ name: "RMQ.ACK", key: this.queue, args: [this.queue, this.body] }]));
    return acked === 1;
  }

  /** @internal */
  async sendNack(opts: NackOptions): Promise<"requeued" | "dead" | null> {
    const args: Arg[] = [this.queue, this.body];
    if (opts.delayMs !== undefined) args.push("DELAY", opts.delayMs);
    if (opts.dead) args.push("DEAD");
    const reply = await retrying(() => send(this.client, "RMQ.NACK", this.queue, args));
    return reply === null ? null : (String(reply) as "requeued" | "dead");
  }

  private claimOrThrow(): void {
    if (!this.claim()) throw new AlreadySettled(`${this} was already acked or nacked`);
  }
}
