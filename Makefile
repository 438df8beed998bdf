# The front door. Everything here also works without make; see README.md.
SHELL := /bin/bash
.DEFAULT_GOAL := help

FERRETDB := .data/bin/ferretdb
# Two test files at a time, whatever the cores (jest's own default is one fewer than the cores:
# one on a two-core machine). A suite spends much of its time waiting on the servers it starts, so
# two halve `make test` on two cores; each worker draws ports from its own slice (at most four:
# libs/testing/src/ports.ts). JEST_WORKERS=1 runs one file at a time.
JEST_WORKERS ?= 2
JEST := node --no-node-snapshot --experimental-vm-modules node_modules/jest/bin/jest.js --maxWorkers=$(JEST_WORKERS)

# Every target runs on Node 24: deploy/local/node.sh installs it into .data/node once (from the npm
# registry), or names the one LATCHKEY_NODE points at (LATCHKEY_NODE=/usr/bin/node for a system
# Node 24). Its directory goes first on PATH, so node, npm ci (and the native modules it builds),
# jest and the services all run on it.
NODE_BIN := $(shell deploy/local/node.sh)
ifeq ($(NODE_BIN),)
$(error no Node 24 to run on (deploy/local/node.sh said why above))
endif
export PATH := $(NODE_BIN):$(PATH)
# The downloaded Node ships its headers: native modules build against them, with no download.
ifneq ($(wildcard $(NODE_BIN)/../include/node/node_version.h),)
export npm_config_nodedir := $(abspath $(NODE_BIN)/..)
endif

NATS_SERVER := .data/bin/nats-server
NATS_SERVER_VERSION := v2.12.15

.PHONY: help up down cluster-up cluster-down nats-server build ferretdb test test-unit test-int e2e bench bench-scale lint clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund

build: node_modules/.package-lock.json ## compile every workspace (tsc -b), the Connect UI bundle and docs/openapi.json
	npx tsc -b
	npm run --silent build:ui -w @latchkey/gateway
	npm run --silent openapi

$(FERRETDB): $(filter-out %_test.go,$(wildcard deploy/ferretdb/*.go)) deploy/ferretdb/go.mod deploy/ferretdb/go.sum
	cd deploy/ferretdb && go build -trimpath -o ../../$(FERRETDB) .

ferretdb: $(FERRETDB) ## build the MongoDB-wire server for native runs (FerretDB)

# A recent NATS server from the Go module proxy, for the clustered topology (Debian's 2.9 also
# clusters, and is what `make up` and the tests fall back to). Takes minutes to build.
$(NATS_SERVER):
	GOBIN=$(CURDIR)/.data/bin go install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)

nats-server: $(NATS_SERVER) ## build a recent nats-server (v2.12) into .data/bin, for cluster-up (takes minutes)

up: build ferretdb ## start NATS, FerretDB and the six services natively; data in .data/
	@deploy/local/up.sh

down: ## stop what `make up` started
	@deploy/local/down.sh

cluster-up: build ferretdb nats-server ## 3 NATS nodes, FerretDB on PostgreSQL, 2 replicas of every service; data in .data/cluster/
	@deploy/local/cluster-up.sh

cluster-down: ## stop what `make cluster-up` started
	@deploy/local/cluster-down.sh

test: build ferretdb ## all tiers: unit, integration, e2e
	@mkdir -p .data
	$(JEST) --selectProjects unit integration e2e --json --outputFile=.data/test-results.json; status=$$?; \
	  node -e 'const r=require("./.data/test-results.json"); console.log(`Tests: $${r.numPassedTests} passed, $${r.numFailedTests} failed, $${r.numPendingTests} skipped`)' || true; \
	  exit $$status

test-unit: node_modules/.package-lock.json ## unit tests (no I/O)
	$(JEST) --selectProjects unit

test-int: build ferretdb ## integration tests (real NATS, real MongoDB-wire server)
	$(JEST) --selectProjects integration

e2e: build ferretdb ## black-box tests against the running stack
	$(JEST) --selectProjects e2e

bench: build ferretdb ## hot-path benchmarks, as ratios against a baseline
	node bench/dist/run.js

# Sizes and backends: BENCH_SCALE_SIZES=10000,100000,1000000 BENCH_SCALE_BACKENDS=sqlite,postgresql
# Parts: BENCH_SCALE_PARTS=records,connections,api-keys (also webhooks,scheduler: BENCH_SCALE_WEBHOOKS, BENCH_SCALE_SCHEDULES)
bench-scale: build ferretdb $(NATS_SERVER) ## how each hot operation's cost grows with the data beside it
	node bench/dist/scale.js

.PHONY: chaos
# Not part of `make test`: minutes of load while NATS nodes, replicas, FerretDB and a rolling
# restart hit the stack (three-node NATS: .data/bin/nats-server, NATS_SERVER_BIN or PATH).
chaos: build ferretdb ## the full chaos schedule under load; prints what held per fault
	node --no-node-snapshot e2e/dist/chaos/run.js

.PHONY: chaos-nats
# Not part of `make test` either: a few minutes, one NATS node at a time, then the node leading
# the rate-limit bucket just before the minute turns.
chaos-nats: build ferretdb ## proxy calls through both gateways while each NATS node is killed; prints each failure window
	node --no-node-snapshot e2e/dist/chaos/nats-loss.js

lint: node_modules/.package-lock.json ## type-check everything, then check import boundaries and cycles (ESLint)
	npx tsc -b --force --noEmit false
	npx eslint .

clean: ## remove build output (not .data/)
	npx tsc -b --clean

# The Helm chart, checked as CI does: helm (from the Go module proxy) and our validator
# (deploy/helm/validate: strict decoding into the Kubernetes API types) are built into .data/bin.
HELM_VERSION := v3.22.0
HELM := .data/bin/helm
K8S_VALIDATE := .data/bin/k8s-validate

.PHONY: chart-check chart-tools

$(HELM):
	GOBIN=$(CURDIR)/.data/bin go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(K8S_VALIDATE): deploy/helm/validate/main.go deploy/helm/validate/go.mod deploy/helm/validate/go.sum
	cd deploy/helm/validate && go build -trimpath -o ../../../$(K8S_VALIDATE) .

chart-tools: $(HELM) $(K8S_VALIDATE) ## build helm and the manifest validator into .data/bin

chart-check: chart-tools ## helm lint, helm template with each value set, strict validation of every object
	@HELM=$(HELM) K8S_VALIDATE=$(K8S_VALIDATE) deploy/helm/check.sh
