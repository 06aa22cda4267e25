# The Runlet Node image: operator, sidecar and CLI (`runlet operator`, `runlet sidecar`, `runlet ...`).
# Build: make images   (docker build -t runlet/runlet:$(VERSION) .)

FROM node:24-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY cli cli
COPY sidecar sidecar
COPY kube kube
COPY operator operator
COPY management management
COPY crds crds
COPY local local
RUN npm run build

FROM node:24-slim
ENV NODE_ENV=production
WORKDIR /opt/runlet
COPY package.json package-lock.json ./
# Production dependencies only; the `node` dev dependency (Node 24 for development machines) is not needed here.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist dist
COPY bin bin
COPY crds/*.yaml crds/
RUN ln -s /opt/runlet/bin/runlet.js /usr/local/bin/runlet
# Numeric (node is 1000:1000 in the node images), so the kubelet can check runAsNonRoot against it.
USER 1000:1000
ENTRYPOINT ["runlet"]
