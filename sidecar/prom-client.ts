// prom-client's Registry and metric classes, required one file each. The package's index also loads its
// Pushgateway (node:https with tls, zlib), its cluster aggregator (node:cluster), Summary (tdigest) and the
// default metrics with @opentelemetry/api: 17 MB of RSS in all (Node 24.21, prom-client 15) against 3 MB for
// these four, of a sidecar whose target is 80 MB. The files are the ones the index itself exports
// (start-modules.test.ts holds them to it, so an upgrade that moves them fails there, not in a pod).
// Types come from the package's own declarations through `import type`, which leaves no import.
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

const require = createRequire(import.meta.url);

export const Registry = require('prom-client/lib/registry') as typeof PromClient.Registry;
export const Counter = require('prom-client/lib/counter') as typeof PromClient.Counter;
export const Gauge = require('prom-client/lib/gauge') as typeof PromClient.Gauge;
export const Histogram = require('prom-client/lib/histogram') as typeof PromClient.Histogram;
export type Registry = PromClient.Registry;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
export declare namespace Counter {
  type Internal = PromClient.Counter.Internal;
}
export declare namespace Histogram {
  type Internal<T extends string> = PromClient.Histogram.Internal<T>;
}
