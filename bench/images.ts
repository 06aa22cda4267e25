// The container images' sizes (`make images`, images/images.sh): measured once, with what they are made of,
// written into every report as its own section. test/images/images.test.ts prints the sizes on every run and
// fails past a bound that a dev dependency or a build tree slipping into an image would cross.
import type { ReportSection } from './report.ts';

export const IMAGES_SECTION: ReportSection = {
  title: 'Container images (measured once, on 2026-11-26)',
  lines: [
    'Uncompressed sizes as podman 4.3 reports them (`podman image inspect --format {{.Size}}`), built by `make images` on bases made from Debian bookworm\'s packages (images/stand-in-bases.sh: no registry is reachable here).',
    '',
    '| image | size | of which |',
    '|---|---|---|',
    '| `runlet/runlet:0.1.0` (Dockerfile: operator, sidecar, CLI) | 377 MB | base `node:24-bookworm-slim` 267 MB (the Node 24.21.0 binary 121 MB, npm 19 MB, Debian minbase the rest); jemalloc 2 MB (the sidecar\'s allocator); production `node_modules` 104 MB (`@kubernetes/client-node` 65 MB of it); the compiled `dist/` 2 MB |',
    '| `runlet/python-runtime:0.1.0` (runtime/python/Dockerfile) | 173 MB | base `python:3.11-slim-bookworm` 173 MB (Debian\'s python3 3.11 and its standard library, ca-certificates, tzdata); the runtime itself under 1 MB |',
    '',
    '`make images` here (2 cores shared with other work, load average about 4): 3 min 44 s from nothing (both bases from Debian\'s packages, then `npm ci` inside the build), 67 s with the bases\' root filesystems cached but an empty engine store, 4 s with the engine\'s layer cache current; `make test-images` then adds about 20 s.',
    '',
    'The Runlet image\'s dev dependencies stay in the build stage (819 MB with them). Most of the rest is the Node binary and `@kubernetes/client-node`.',
  ],
};
