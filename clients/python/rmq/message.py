"""A delivered message and the exceptions a handler raises."""

from __future__ import annotations

import threading
import time
from typing import Optional

from ._protocol import BOUNDS
from ._util import Client, check_int, retrying, run_all, to_str
from .durable import Durable, DurableOption, durable_for


class Dead(Exception):
    """Raised by a handler to send its message straight to dead (``RMQ.NACK … DEAD``)
    instead of back to waiting."""


class AlreadySettled(RuntimeError):
    """ack() or nack() called on a message that was already acked or nacked."""


class Message:
    """One delivery of a message, taken by RMQ.POP or RMQ.TPOP and now in flight.

    ``body`` (bytes), ``queue`` (the queue it came from) and ``deliveries`` (1 on the first
    delivery). ``extend(ms)`` moves its lease. ``ack()`` or ``nack()`` settles it, once:
    under a Worker the worker does this for you (ACK when the handler returns, NACK when it
    raises), so a handler calls them only to settle early; a second call raises
    AlreadySettled. ACK and NACK are retried on connection errors; if they still fail the
    lease runs out and the server delivers the message again (at least once).
    """

    __slots__ = ("_client", "body", "queue", "deliveries", "_lease_end", "_lock", "_settled",
                 "_durable")

    def __init__(self, client: Client, queue: str, body: bytes, deliveries: int,
                 lease_end: Optional[float] = None, durable: Optional[Durable] = None) -> None:
        self._client = client
        self.body = body
        self.queue = queue
        self.deliveries = deliveries
        # time.monotonic() by which the lease runs out, as far as this process knows
        self._lease_end = lease_end
        self._lock = threading.Lock()
        self._settled = False
        self._durable = durable      # the durable mode of the Queue/Topic it came from

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 80 else self.body[:77] + b"..."
        return f"Message(queue={self.queue!r}, body={body!r}, deliveries={self.deliveries})"

    @property
    def settled(self) -> bool:
        return self._settled

    def extend(self, ms: int) -> Optional[int]:
        """RMQ.EXTEND: the lease now ends `ms` from now. Returns the new deadline (server
        Unix ms), or None when the message is no longer in flight (its lease ran out)."""
        check_int("extend ms", ms, *BOUNDS["extend_ms"])
        start = time.monotonic()
        reply = self._client.execute_command("RMQ.EXTEND", self.queue, self.body, ms)
        if reply is not None:
            self._lease_end = start + ms / 1000
        return reply

    def ack(self, durable: DurableOption = None) -> bool:
        """RMQ.ACK. True if it was still in flight; False if the ack came too late (the
        lease had run out and the message went back to waiting). In durable mode (its
        queue's, or `durable` here; 0: none) it raises rmq.NotDurable when too few replicas
        confirm the ACK: it is done on the primary, but a failover may deliver the message
        again."""
        wait = self._durable if durable is None else durable_for(durable)
        self._claim_or_raise()
        return self._send_ack(wait)

    def nack(self, delay_ms: Optional[int] = None, dead: bool = False) -> Optional[str]:
        """RMQ.NACK: back to waiting (after `delay_ms`, else the queue's retry backoff), or
        to dead with `dead=True` or when its retries are used up. Returns "requeued",
        "dead", or None if it was no longer in flight."""
        if delay_ms is not None:
            check_int("nack delay_ms", delay_ms, *BOUNDS["delay"])
        self._claim_or_raise()
        return self._send_nack(delay_ms, dead)

    # -- used by the Worker ----------------------------------------------------------
    def _claim(self) -> bool:
        """Take the right to settle this delivery; False if someone already has."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True

    def _claim_or_raise(self) -> None:
        if not self._claim():
            raise AlreadySettled(f"{self!r} was already acked or nacked")

    def _send_ack(self, durable: Optional[Durable]) -> bool:
        return bool(retrying(
            lambda: run_all(self._client, [("RMQ.ACK", self.queue, self.body)], durable)[0],
            f"ACK on {self.queue}"))

    def _send_nack(self, delay_ms: Optional[int], dead: bool) -> Optional[str]:
        args: list = ["RMQ.NACK", self.queue, self.body]
        if delay_ms is not None:
            args += ["DELAY", delay_ms]
        if dead:
            args.append("DEAD")
        reply = retrying(lambda: self._client.execute_command(*args), f"NACK on {self.queue}")
        return None if reply is None else to_str(reply)
