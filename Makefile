# RMQ — a message queue inside Redis (Redis module in Rust).
#
#   make run    install deps, build, run redis-server on 127.0.0.1:6380 (foreground)
#   make test   install deps, unit tests, build, integration tests (pytest)
#
# No target stops processes by name: the integration tests start their own servers
# on free ports and stop them by pid.

SHELL   := /bin/bash
CARGO   ?= cargo
PYTHON  ?= python3
MODULE  := target/release/librmq.so
CONF    := redis.conf.example
DATADIR := run-data

.PHONY: all deps build run test clean

all: build

deps:
	bash scripts/install-deps

build:
	$(CARGO) build --release

run: deps build
	mkdir -p $(DATADIR)
	@echo "RMQ: redis-server on 127.0.0.1:6380 with $(MODULE), data in ./$(DATADIR) (Ctrl-C stops it)"
	redis-server $(CONF)

test: deps
	$(CARGO) test --release
	$(CARGO) build --release
	$(PYTHON) -m pytest tests -q

# Removes build output and test caches. Keeps ./run-data (the AOF of `make run`);
# delete it by hand to drop the queues stored there.
clean:
	$(CARGO) clean
	rm -rf .pytest_cache
	find . -path ./target -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
