# The Runlet Node image: operator, sidecar and CLI (`runlet operator`, `runlet sidecar`, `runlet ...`).
# Build: make images   (or: docker build -t runlet/runlet:0.1.0 .)
#
# Behind a TLS-intercepting proxy, give npm the proxy's CA as the build secret npm_ca (a PEM file); it is
# mounted for the `npm ci` steps only and stored in no layer:
#   docker build --secret id=npm_ca,src=/path/to/proxy-ca.pem -t runlet/runlet:0.1.0 .
# (`make images` passes $NODE_EXTRA_CA_CERTS this way.) Without the secret the steps use Node's own CAs.
#
# The Debian release is named so the image does not change under a rebuild (node:24-slim follows Debian's
# newest), and so machines without a registry can build this same base from Debian's packages (images/).

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npm_ca \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \
    npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY cli cli
COPY run-request run-request
COPY sidecar sidecar
COPY kube kube
COPY operator operator
COPY activator activator
COPY management management
COPY crds crds
COPY local local
COPY dashboard dashboard
COPY results results
RUN npm run build

FROM node:24-bookworm-slim
ENV NODE_ENV=production
# jemalloc, which the operator preloads into the pod's sidecar (operator/render/sidecar-container.ts), at one
# path whatever the architecture. apt's lists and caches go in the same step (80 MB of them otherwise).
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 \
    && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
    && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc\.so\.2$')" /usr/local/lib/libjemalloc.so.2
WORKDIR /opt/runlet
COPY package.json package-lock.json ./
# Production dependencies only; the `node` dev dependency (Node 24 for development machines) is not needed here.
RUN --mount=type=secret,id=npm_ca \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \
    npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist dist
COPY bin bin
COPY crds/*.yaml crds/
RUN ln -s /opt/runlet/bin/runlet.js /usr/local/bin/runlet
# Numeric (node is 1000:1000 in the node images), so the kubelet can check runAsNonRoot against it.
USER 1000:1000
ENTRYPOINT ["runlet"]
