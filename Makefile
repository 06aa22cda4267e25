# Every target runs through npm scripts so the pinned Node 24 (npm `node` package) is the one used.
SHELL := /bin/bash
NPM := npm --silent
PYTHON ?= python3

.PHONY: install dev test typecheck test-ts test-python test-cluster control-plane build bench images clean

# npm ci empties node_modules first: through a link (a git worktree sharing another checkout's) it would empty
# the other checkout's too, under whatever runs there.
node_modules/.install-stamp: package.json package-lock.json
	@if [ -L node_modules ]; then echo "node_modules is a link to another checkout's: install there, not through it" >&2; exit 1; fi
	npm ci --no-audit --no-fund
	@touch $@

install: node_modules/.install-stamp

dev: install
	$(NPM) run dev

typecheck: install
	$(NPM) run typecheck

test-python:
	cd runtime/python && $(PYTHON) -m unittest discover -s tests -t . -v

# Everything but the control-plane tier, which test-cluster runs.
CLUSTER_TESTS := test/operator/control-plane.test.ts test/operator/readme-walkthrough.test.ts
test-ts: install
	$(NPM) run test -- $(addprefix --exclude ,$(CLUSTER_TESTS))

# A real Kubernetes control plane (test/control-plane/control-plane.sh): built from Debian's kubernetes source
# on the first run on a machine (cached under ~/.cache/runlet/control-plane), reused after. Where it cannot be
# built (no apt, no Debian mirror), the tier's tests say why and are skipped instead of failing `make test`.
control-plane:
	@test/control-plane/control-plane.sh build || echo "control-plane: cannot be built on this machine; its tests will be skipped"

# One file at a time: each starts its own control plane, and two at once overload a 2-core machine.
test-cluster: install control-plane
	$(NPM) run test -- --no-file-parallelism $(CLUSTER_TESTS)

test: typecheck test-python test-ts test-cluster

build: install
	$(NPM) run build

bench: install
	$(NPM) run bench

# Container images (needs a Docker engine; these development machines have none).
VERSION ?= $(shell node -p "require('./package.json').version")
IMAGE_REPO ?= runlet
images:
	docker build -t $(IMAGE_REPO)/runlet:$(VERSION) .
	docker build -t $(IMAGE_REPO)/python-runtime:$(VERSION) runtime/python

clean:
	rm -rf dist .runlet
