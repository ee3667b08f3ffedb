"""Crash safety (docs/COMMANDS.md: "Every command is atomic: a crash leaves each message in exactly one
of its states"), with --appendonly yes --appendfsync always.

Producer threads push unique messages (a message counts as pushed only once the server
replied), consumer threads pop (small COUNT, a lease of a few seconds) and ack (a message
counts as acked only once ACK replied 1), nack (requeue or DEAD) or keep some.  After a
random 0.5-2 s the server is killed with SIGKILL (by the pid started here) and restarted on
the same dir.  Then every acknowledged push is exactly once among: acked, waiting (Q), in
flight (prepare{Q}), dead (dead{Q}); nothing acked is left in any of them; nothing unknown
appears.  The inherent at-least-once window is allowed: a push or an ACK that was sent but not
answered when the server died may or may not have happened.  Finally the leases reloaded
from the AOF are rolled back by the restarted server's timer once they run out.
"""

import random
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from helpers import dead, prep
from server_support import Server, wait_for

QUEUES = {"crash:prio": ("PRIORITY", None), "crash:range": ("RANGE", 1),
          "crash:delay": ("DELAY", 0), "crash:at": ("AT", None)}
PRODUCERS = 3
CONSUMERS = 2
LEASE_MS = 2500


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.push_sent = set()      # sent, reply not (yet) seen
        self.pushed = {}            # message -> queue, push replied
        self.ack_sent = set()       # ACK sent, reply not (yet) seen
        self.acked = {}             # message -> number of ACKs that replied 1
        self.errors = []


def _client(server):
    # no automatic retries: a command is sent once, or the thread stops
    return redis.Redis(host="127.0.0.1", port=server.port, protocol=2, socket_timeout=10,
                       socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))


def producer(server, ledger, idx, seed, stop):
    rng = random.Random(seed)
    c = _client(server)
    seq = 0
    try:
        while not stop.is_set():
            q = rng.choice(sorted(QUEUES))
            opt, val = QUEUES[q]
            if opt == "PRIORITY":
                val = rng.randrange(0, 10)
            elif opt == "AT":
                val = int(time.time() * 1000) - rng.randrange(0, 5000)
            batch = [b"p%d-%d" % (idx, seq + i) for i in range(rng.randint(1, 3))]
            seq += len(batch)
            with ledger.lock:
                ledger.push_sent.update(batch)
            n = c.execute_command("RMQ.PUSH", q, opt, val, *batch)
            with ledger.lock:
                if n != len(batch):
                    ledger.errors.append(f"push of {len(batch)} new messages replied {n}")
                ledger.push_sent.difference_update(batch)
                for m in batch:
                    ledger.pushed[m] = q
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        pass  # the server was killed
    except Exception as e:  # pragma: no cover - reported by the test
        ledger.errors.append(f"producer {idx}: {e!r}")
    finally:
        c.close()


def consumer(server, ledger, idx, seed, stop):
    rng = random.Random(seed)
    c = _client(server)
    try:
        while not stop.is_set():
            q = rng.choice(sorted(QUEUES))
            got = c.execute_command("RMQ.POP", q, "COUNT", rng.randint(1, 4), "LEASE", LEASE_MS)
            if not got:
                time.sleep(0.001)
                continue
            for m, _deliveries in got:
                x = rng.random()
                if x < 0.7:
                    with ledger.lock:
                        ledger.ack_sent.add(m)
                    n = c.execute_command("RMQ.ACK", q, m)
                    with ledger.lock:
                        ledger.ack_sent.discard(m)
                        if n == 1:
                            ledger.acked[m] = ledger.acked.get(m, 0) + 1
                        elif n != 0:
                            ledger.errors.append(f"ACK of one message replied {n}")
                elif x < 0.82:
                    c.execute_command("RMQ.NACK", q, m)
                elif x < 0.88:
                    c.execute_command("RMQ.NACK", q, m, "DEAD")
                # else: keep the lease (in flight at the crash)
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        pass
    except Exception as e:  # pragma: no cover
        ledger.errors.append(f"consumer {idx}: {e!r}")
    finally:
        c.close()


def where(c):
    """message -> list of (state, queue) over every queue, read in one MULTI/EXEC: the
    timer may roll a lease back between two separate reads, and the message would be seen
    in neither key."""
    keys = [(state, q, key) for q in QUEUES
            for state, key in (("waiting", q), ("inflight", prep(q)), ("dead", dead(q)))]
    pipe = c.pipeline(transaction=True)
    for _, _, key in keys:
        pipe.zrange(key, 0, -1)
    out = {}
    for (state, q, _), members in zip(keys, pipe.execute()):
        for m in members:
            out.setdefault(m, []).append((state, q))
    return out


@pytest.mark.parametrize("round_no", [0, 1, 2])
def test_kill9_loses_no_acknowledged_push_and_resurrects_no_ack(round_no):
    rng = random.Random(1000 + round_no)
    server = Server(conf=["--appendonly", "yes", "--appendfsync", "always"],
                    tag="rmq-crash").start()
    try:
        ledger = Ledger()
        stop = threading.Event()
        threads = [threading.Thread(target=producer, args=(server, ledger, i, rng.random(), stop),
                                    daemon=True) for i in range(PRODUCERS)]
        threads += [threading.Thread(target=consumer, args=(server, ledger, i, rng.random(), stop),
                                     daemon=True) for i in range(CONSUMERS)]
        for t in threads:
            t.start()
        run_for = rng.uniform(0.5, 2.0)
        time.sleep(run_for)
        # on a slow machine, run on (bounded) until there is enough traffic to judge
        deadline = time.monotonic() + 10
        while (len(ledger.pushed) <= 100 or len(ledger.acked) <= 20) and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=10)
        assert not any(t.is_alive() for t in threads), "a client thread did not stop"
        assert not ledger.errors, ledger.errors

        server.restart(graceful=False)
        c = server.client()
        loc = where(c)

        pushed, acked = ledger.pushed, ledger.acked
        assert len(pushed) > 100 and len(acked) > 20, \
            f"too little traffic before the kill: {len(pushed)} pushed, {len(acked)} acked"
        problems = []
        for m, n in acked.items():
            if n > 1:
                problems.append(f"{m!r} acked {n} times")
        for m, places in loc.items():
            if len(places) > 1:
                problems.append(f"{m!r} in several states: {places}")
            if m in acked:
                problems.append(f"{m!r} was acked but is {places}")
            if m not in pushed and m not in ledger.push_sent:
                problems.append(f"{m!r} was never pushed but is {places}")
            if m in pushed and places[0][1] != pushed[m]:
                problems.append(f"{m!r} pushed to {pushed[m]} but found in {places}")
        lost = [m for m in pushed if m not in acked and m not in loc and m not in ledger.ack_sent]
        if lost:
            problems.append(f"{len(lost)} acknowledged pushes lost, e.g. {lost[:5]}")
        assert not problems, "\n".join(problems[:20])

        # the leases reloaded from the AOF run out and are rolled back by the timer
        inflight = [m for m, p in loc.items() if p[0][0] == "inflight"]
        # (the timer may already have rolled some back: they have no deadline left)
        deadlines = (c.zscore(prep(loc[m][0][1]), m) for m in inflight)
        latest = max((d for d in deadlines if d is not None), default=None)
        if latest is not None:
            wait_for(lambda: all(c.zcard(prep(q)) == 0 for q in QUEUES),
                     timeout=max(0.0, (latest - time.time() * 1000) / 1000) + 1.5,
                     interval=0.02, what="the reloaded leases to be rolled back")
            loc2 = where(c)
            for m in inflight:
                assert [s for s, _ in loc2.get(m, [])] in (["waiting"], ["dead"]), \
                    f"{m!r} after its lease ran out: {loc2.get(m)}"
            assert set(loc2) == set(loc), "messages appeared or vanished during the rollbacks"
        print(f"round {round_no}: killed after {run_for:.2f}s; {len(pushed)} pushed, "
              f"{len(acked)} acked, {len(loc)} left, {len(inflight)} in flight, "
              f"{len(ledger.push_sent)} push / {len(ledger.ack_sent)} ack unanswered")
    finally:
        server.stop()
