# Every target runs through npm scripts so the pinned Node 24 (npm `node` package) is the one used.
SHELL := /bin/bash
NPM := npm --silent
PYTHON ?= python3

.PHONY: install dev test typecheck test-ts test-python build bench images clean

node_modules/.install-stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: node_modules/.install-stamp

dev: install
	$(NPM) run dev

typecheck: install
	$(NPM) run typecheck

test-python:
	cd runtime/python && $(PYTHON) -m unittest discover -s tests -t . -v

test-ts: install
	$(NPM) run test

test: typecheck test-python test-ts

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
