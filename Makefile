# Every target runs through npm scripts so the pinned Node 24 (npm `node` package) is the one used.
SHELL := /bin/bash
NPM := npm --silent
PYTHON ?= python3

.PHONY: install dev test typecheck test-ts test-python test-images test-cluster control-plane build bench images clean

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

# Everything but the control-plane tier and the images tier, which test-cluster and test-images run.
CLUSTER_TESTS := test/operator/control-plane.test.ts test/operator/control-plane-results.test.ts test/operator/results-outage.test.ts test/operator/readme-walkthrough.test.ts test/operator/real-kubelet.test.ts test/operator/cross-tenant.test.ts
IMAGE_TESTS := test/images/images.test.ts test/images/postgres-image.test.ts
test-ts: install
	$(NPM) run test -- $(addprefix --exclude ,$(CLUSTER_TESTS) $(IMAGE_TESTS))

# The images, built by `make images` (podman installed where the machine has no engine; bases from Debian's
# packages where they cannot be pulled, cached under ~/.cache/runlet/images), then run under the pod security
# the operator renders. Where no engine can be had, the tests say why and are skipped instead of failing.
test-images: install
	@$(MAKE) --no-print-directory images || echo "images: cannot be built on this machine; their tests will say why"
	$(NPM) run test -- $(IMAGE_TESTS)

# A real Kubernetes control plane (test/control-plane/control-plane.sh): built from Debian's kubernetes source
# on the first run on a machine (cached under ~/.cache/runlet/control-plane), reused after; with it kubelet and
# kube-proxy, and for the real Node (test/control-plane/node.sh) Debian's containerd, runc and CNI plugins.
# Where it cannot be built (no apt, no Debian mirror), the tier's tests say why and are skipped instead of
# failing `make test`.
control-plane:
	@test/control-plane/control-plane.sh build || echo "control-plane: cannot be built on this machine; its tests will be skipped"
	@test/control-plane/node.sh install || echo "control-plane: no real Node on this machine (containerd, runc); its tests (real-kubelet, README walkthrough) will be skipped"

# One file at a time: each starts its own control plane, and two at once overload a 2-core machine. The real
# Node runs the images of this checkout: `make images` first (seconds when nothing changed).
test-cluster: install control-plane
	@$(MAKE) --no-print-directory images || echo "images: cannot be built on this machine; the real-Node tests (real-kubelet, README walkthrough) will say why"
	$(NPM) run test -- --no-file-parallelism $(CLUSTER_TESTS)

test: typecheck test-python test-ts test-images test-cluster

build: install
	$(NPM) run build

bench: install
	$(NPM) run bench

# Container images runlet/runlet and runlet/python-runtime (images/images.sh): with docker, podman or buildah,
# podman installed from Debian's packages where there is none; base images that cannot be pulled are built
# from Debian's packages (cached under ~/.cache/runlet/images). NODE_EXTRA_CA_CERTS, when set, is given to
# the build as the npm_ca secret (a TLS-intercepting proxy's CA). IMAGE_REPO=registry.example.com/runlet
# names them for another registry.
VERSION ?= $(shell node -p "require('./package.json').version")
IMAGE_REPO ?= runlet
images: install
	IMAGE_REPO=$(IMAGE_REPO) images/images.sh build $(VERSION)

clean:
	rm -rf dist .runlet
