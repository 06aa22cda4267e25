// The operator's configuration: what it renders into every pod (images, ingress, sidecar mode), how it elects
// a leader, how it looks after RunLogs, and where it serves health, metrics and the management API. Layers merge in order — defaults, the --config file
// (YAML or JSON), environment, flags — and the result is validated once, with every problem listed.
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value, type ValueError } from '@sinclair/typebox/value';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_HOLD_LIMITS } from '../activator/hold-bounds.ts';
import type { QuotaLimits } from '../results/namespace-quotas.ts';

const MIB = 1024 * 1024;
const Seconds = (description: string) => Type.Number({ exclusiveMinimum: 0, description });
const Image = (description: string) => Type.String({ minLength: 1, description });
const StrictObject = <T extends Record<string, TSchema>>(properties: T) => Type.Object(properties, { additionalProperties: false });

export const IngressConfigSchema = StrictObject({
  className: Type.Optional(Type.String({ minLength: 1, description: 'spec.ingressClassName of every Ingress.' })),
  host: Type.Optional(
    Type.String({
      minLength: 1,
      // A DNS name as an Ingress rule takes it (a leading `*.` allowed), whose labels may be `{namespace}`.
      pattern: String.raw`^(\*\.)?(\{namespace\}|[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.(\{namespace\}|[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?))*$`,
      description: 'The host every app is reached on (path /v4/<namespace>/<app>); `{namespace}` in it gives each namespace a host of its own.',
    }),
  ),
  tls: Type.Optional(Type.Boolean({ description: 'Serve the host over HTTPS (URLs say https).' })),
  tlsSecretName: Type.Optional(Type.String({ minLength: 1, description: 'Certificate Secret in each app namespace; default: the controller default.' })),
  annotations: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'Copied onto every Ingress (controller settings such as read timeouts).' })),
});

export const LeaderElectionConfigSchema = StrictObject({
  namespace: Type.String({ minLength: 1, description: 'Namespace of the Lease.' }),
  leaseName: Type.String({ minLength: 1 }),
  identity: Type.String({ minLength: 1, description: 'This replica’s name in the Lease; unique per replica.' }),
  leaseDurationSeconds: Seconds('How long a lease holds without renewal before another replica takes over.'),
  renewDeadlineSeconds: Seconds('The leader steps down when it could not renew for this long.'),
  retryPeriodSeconds: Seconds('How often replicas try to acquire or renew.'),
});

export const RunLogsConfigSchema = StrictObject({
  sweepSeconds: Seconds('How often the leader looks over every RunLog whose pod is gone: runs left in flight, retention.'),
  countersIntervalSeconds: Seconds('Least time between two writes of one App’s status.runs counters.'),
});

const QuotaCount = (description: string) => Type.Integer({ minimum: 0, description: `${description} 0: no limit.` });
const NamespaceName = Type.String({ pattern: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' });

export const ResultsConfigSchema = StrictObject({
  retentionDays: Type.Integer({ minimum: 1, maximum: 3650, description: 'Days the results store keeps the runs of an App that sets no spec.runs.retentionDays.' }),
  pruneIntervalSeconds: Seconds('How often the leader deletes the runs past their retention (in batches).'),
  pruneBatchSize: Type.Integer({ minimum: 1, maximum: 100_000, description: 'Rows deleted per statement by the retention job.' }),
  sweepSeconds: Seconds('How often the leader marks the runs left in flight by gone pods replica_lost.'),
  presenceSeconds: Seconds('How often each operator replica marks itself present in the results store; one that misses three marks is gone, and the webhooks it was delivering (of held calls it cancelled) are closed as not delivered.'),
  collectorUrl: Type.Union([Type.String({ minLength: 1 }), Type.Null()], {
    description:
      "Where sidecars send their run records (the collector Service's origin, e.g. http://runlet-collector.runlet-system.svc:8082): set, pods run `--run-store results`; null: they write RunLogs.",
  }),
  collectorPort: Type.Integer({
    minimum: 0,
    maximum: 65535,
    description: 'Port of the results collector (on server.host), apart from the management API: the only one App pods send bodies to.',
  }),
  collectorMaxInFlightMiB: Type.Integer({
    // Two of the largest batches (17 MiB) and room besides.
    minimum: 40,
    maximum: 4096,
    description:
      "MiB of batch bodies the collector holds at once across all pods, counted as they arrive and shared fairly between namespaces (each owed an equal part, at least one batch); a batch past it is answered 503 + Retry-After.",
  }),
  maxRunsPerNamespace: QuotaCount(
    'Runs one namespace keeps in the results store at most: past it the collector records no new run of it (its async calls are answered 507 run-store-quota-exceeded) until retention deletes older ones; runs already recorded still finish.',
  ),
  maxRecordMiBPerNamespace: QuotaCount('MiB of run records (their JSON) one namespace keeps at most; past it, as maxRunsPerNamespace.'),
  maxKeptResultMiBPerNamespace: QuotaCount('MiB of kept results (their JSON) one namespace keeps at most; past it, runs are recorded without their result (resultKept false).'),
  namespaceQuotas: Type.Record(
    NamespaceName,
    StrictObject({
      maxRuns: Type.Optional(QuotaCount('This namespace’s maxRunsPerNamespace.')),
      maxRecordMiB: Type.Optional(QuotaCount('This namespace’s maxRecordMiBPerNamespace.')),
      maxKeptResultMiB: Type.Optional(QuotaCount('This namespace’s maxKeptResultMiBPerNamespace.')),
    }),
    { description: 'Quotas of particular namespaces, by name, over the per-namespace defaults above.' },
  ),
  usageMetricsSeconds: Seconds('How often each operator replica reads the database’s size and every namespace’s usage for /metrics.'),
});

export const AutoscalingConfigSchema = StrictObject({
  stableWindowSeconds: Seconds('Knative’s stable window: the load is averaged over it; the panic window is a tenth of it.'),
  tickMilliseconds: Type.Integer({ minimum: 50, maximum: 10_000, description: 'How often the leader decides every autoscaled App.' }),
});

export const HolderConfigSchema = StrictObject({
  enabled: Type.Boolean({ description: 'Run the holder, so that Apps with minReplicas 0 go to zero; false keeps them at one replica.' }),
  inOperator: Type.Boolean({
    description: 'Hold the calls in the operator pods (on host and port); false: `runlet activator` pods hold them, listed by serviceName, and the operator only points Apps at zero at them.',
  }),
  host: Type.String({ minLength: 1 }),
  port: Type.Integer({ minimum: 0, maximum: 65535, description: 'Port of the holder: calls to Apps at zero replicas (docs/scale-to-zero.md).' }),
  serviceNamespace: Type.String({ minLength: 1, description: 'Namespace of the Service whose Endpoints list the holder replicas.' }),
  serviceName: Type.String({ minLength: 1, description: 'That Service: Apps at zero have their Endpoints pointed at its addresses.' }),
  keySecretName: Type.String({
    minLength: 1,
    description: 'Secret in serviceNamespace holding the control key the operator signs its requests to the holders with; created with a random key when missing. Each app namespace has its own hand-over key (Secret runlet-holder-key there), derived from nothing.',
  }),
  heldCallsNamespace: Type.String({
    pattern: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$',
    description:
      'Namespace of the records of async calls held at zero (Secrets holding callers’ bodies and webhook secrets): the holder writes them, a cancel reads and deletes them. A namespace of their own, so that the right to list them reaches no other Secret.',
  }),
  activatorAdminPort: Type.Integer({
    minimum: 1,
    maximum: 65535,
    description: 'Admin port of the activator pods (inOperator false): the leader reads the calls waiting there (/load) for the autoscaler.',
  }),
  maxHeldCallsPerApp: Type.Integer({ minimum: 1, description: 'Calls to one App each holder takes while it starts (waiting, or relayed and not yet answered); more are refused at once, 503 over-capacity.' }),
  maxHeldCalls: Type.Integer({ minimum: 1, description: 'Calls to all Apps together each holder takes; more are refused at once, 503 over-capacity.' }),
  maxHeldBodyMiB: Type.Integer({ minimum: 1, description: 'MiB of held calls’ bodies each holder keeps, all Apps together; a body past them is refused at once, 503 request-buffer-full.' }),
});

const Labels = Type.Record(Type.String({ minLength: 1 }), Type.String());
const LabelSelectorSchema = StrictObject({
  matchLabels: Type.Optional(Labels),
  matchExpressions: Type.Optional(
    Type.Array(StrictObject({ key: Type.String({ minLength: 1 }), operator: Type.Union([Type.Literal('In'), Type.Literal('NotIn'), Type.Literal('Exists'), Type.Literal('DoesNotExist')]), values: Type.Optional(Type.Array(Type.String())) })),
  ),
});

export const NetworkPolicyConfigSchema = StrictObject({
  ingressController: Type.Optional(
    Type.Object(
      { namespaceSelector: LabelSelectorSchema, podSelector: Type.Optional(LabelSelectorSchema) },
      { additionalProperties: false, description: 'The ingress controller’s pods: set, the run port admits only them, the operator pods and runFromNamespaces; absent (and no runFromNamespaces): any pod.' },
    ),
  ),
  runFromNamespaces: Type.Array(Type.String({ minLength: 1 }), { description: 'Namespaces (by name) whose pods may call the run port too; named, the run port admits no other pod.' }),
  metricsFromNamespaces: Type.Array(Type.String({ minLength: 1 }), { description: 'Namespaces (by name) whose pods may scrape the admin port (Prometheus); none: no pod may.' }),
  operatorPods: Type.Object(
    { namespace: Type.String({ minLength: 1 }), matchLabels: Labels },
    { additionalProperties: false, description: 'The operator and activator pods: the operator scrapes load and cancels runs on the admin port, the activator hands held calls to the run port.' },
  ),
});

/** The label the operator and activator pods carry (the chart sets it), which App pods' NetworkPolicy admits to the admin port. */
export const APP_PEER_LABEL = 'runlet.dev/app-peer';

export const ApiKeysConfigSchema = StrictObject({
  maxExpiryDays: Type.Integer({
    minimum: 1,
    maximum: 3650,
    description: 'The longest an API key may be made to last, in days; a key asked to expire later is refused (400, naming the limit).',
  }),
});

export const OperatorConfigSchema = StrictObject({
  sidecarImage: Image('The image with the `runlet` command, run as each pod’s sidecar.'),
  pythonRuntimeImage: Image('The Python runtime image for apps that name none.'),
  ingress: Type.Union([IngressConfigSchema, Type.Null()], { description: 'null: no Ingress objects; URLs are cluster-local.' }),
  nativeSidecars: Type.Union([Type.Literal('auto'), Type.Boolean()], {
    description: 'Sidecar as an init container with restartPolicy Always: auto (when the API server and the oldest kubelet among the Nodes are ≥ 1.29), true or false.',
  }),
  webhookAllowCidrs: Type.Array(Type.String({ minLength: 1 }), { description: 'CIDRs webhooks may reach despite the SSRF guard.' }),
  imagePullSecrets: Type.Array(StrictObject({ name: Type.String({ minLength: 1, maxLength: 253 }) }), {
    description: "Secrets (in each app's namespace) every App pod pulls its images with, as in a pod spec: [{name: regcred}].",
  }),
  networkPolicy: Type.Union([NetworkPolicyConfigSchema, Type.Null()], {
    description: 'A NetworkPolicy per App: the run port, the admin port from the operator pods and metrics namespaces, nothing else (render/network-policy.ts); null: none.',
  }),
  leaderElection: LeaderElectionConfigSchema,
  server: StrictObject({
    host: Type.String({ minLength: 1 }),
    port: Type.Integer({ minimum: 0, maximum: 65535, description: 'Port of /healthz, /ready and the management API (/v2).' }),
    metricsPort: Type.Integer({
      minimum: 0,
      maximum: 65535,
      // The metrics name every namespace's Apps and their load: a port of their own is one a NetworkPolicy can
      // close to tenants while the management API stays open to them (a policy selects ports, not paths).
      description: 'Port of /metrics (and /healthz, /ready), apart from the management API: for Prometheus, not for tenants.',
    }),
  }),
  runLogs: RunLogsConfigSchema,
  results: ResultsConfigSchema,
  autoscaling: AutoscalingConfigSchema,
  holder: HolderConfigSchema,
  apiKeys: ApiKeysConfigSchema,
  workers: Type.Integer({ minimum: 1, maximum: 64, description: 'Apps reconciled concurrently.' }),
  watchdogSeconds: Seconds('Restart a watch that delivered no event and no bookmark for this long.'),
  resyncSeconds: Seconds('Reconcile every App this often even without events (repairs drift).'),
  requestTimeoutSeconds: Seconds('Bound on every API call.'),
  logLevel: Type.Union([Type.Literal('fatal'), Type.Literal('error'), Type.Literal('warn'), Type.Literal('info'), Type.Literal('debug'), Type.Literal('trace'), Type.Literal('silent')]),
});

export type OperatorConfig = Static<typeof OperatorConfigSchema>;
export type IngressConfig = Static<typeof IngressConfigSchema>;
export type LeaderElectionConfig = Static<typeof LeaderElectionConfigSchema>;
export type RunLogsConfig = Static<typeof RunLogsConfigSchema>;
export type HolderConfig = Static<typeof HolderConfigSchema>;
export type ResultsConfig = Static<typeof ResultsConfigSchema>;

/** One layer of configuration: any subset, nested objects merged field by field. */
export type ConfigLayer = {
  [K in keyof OperatorConfig]?: OperatorConfig[K] extends readonly unknown[] | null
    ? OperatorConfig[K]
    : OperatorConfig[K] extends object
      ? Partial<OperatorConfig[K]> | (null extends OperatorConfig[K] ? null : never)
      : OperatorConfig[K];
};

/** Everything but the images has a default: a wrong default image is worse than a clear start-up error. */
export function defaultConfigLayer(env: NodeJS.ProcessEnv = process.env): ConfigLayer {
  return {
    ingress: null,
    // On: a custom app's own port and the sidecar's admin port are closed to other pods wherever the CNI enforces
    // NetworkPolicies. The run port stays open to every pod (callers are authenticated there); the operator's
    // pods are found by their label in the namespace it runs in.
    networkPolicy: {
      runFromNamespaces: [],
      metricsFromNamespaces: [],
      operatorPods: { namespace: env.POD_NAMESPACE || 'default', matchLabels: { [APP_PEER_LABEL]: 'true' } },
    },
    nativeSidecars: 'auto',
    webhookAllowCidrs: [],
    imagePullSecrets: [],
    leaderElection: {
      namespace: env.POD_NAMESPACE || 'default',
      leaseName: 'runlet-operator',
      identity: env.POD_NAME || `${hostname()}-${process.pid}`,
      // client-go's defaults: a crashed leader is replaced within about 15 s.
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
    },
    server: { host: '0.0.0.0', port: 8080, metricsPort: 8081 },
    // A vanished pod is usually noticed by its watch event at once; the sweep catches the rest and retention.
    runLogs: { sweepSeconds: 60, countersIntervalSeconds: 10 },
    results: {
      retentionDays: 30,
      pruneIntervalSeconds: 3600,
      pruneBatchSize: 1000,
      sweepSeconds: 30,
      presenceSeconds: 5,
      collectorUrl: null,
      collectorPort: 8082,
      collectorMaxInFlightMiB: 64,
      // One namespace at its quotas holds about 2 GiB of rows and indexes and 1 GiB of results on disk: a third of
      // the chart's default 10 GiB volume, which also needs room for vacuum and WAL (charts/runlet/values.yaml).
      maxRunsPerNamespace: 2_000_000,
      maxRecordMiBPerNamespace: 2048,
      maxKeptResultMiBPerNamespace: 1024,
      namespaceQuotas: {},
      usageMetricsSeconds: 60,
    },
    autoscaling: { stableWindowSeconds: 60, tickMilliseconds: 500 },
    holder: {
      enabled: true,
      inOperator: true,
      host: '0.0.0.0',
      port: 8090,
      serviceNamespace: env.POD_NAMESPACE || 'default',
      serviceName: 'runlet-holder',
      keySecretName: 'runlet-holder-control',
      heldCallsNamespace: `${env.POD_NAMESPACE || 'default'}-held`,
      activatorAdminPort: 8081,
      maxHeldCallsPerApp: DEFAULT_HOLD_LIMITS.callsPerApp,
      maxHeldCalls: DEFAULT_HOLD_LIMITS.calls,
      maxHeldBodyMiB: DEFAULT_HOLD_LIMITS.bodyBytes / MIB,
    },
    // A key handed to a CI system still ends within a year.
    apiKeys: { maxExpiryDays: 365 },
    workers: 4,
    // Real API servers send a bookmark about once a minute on quiet watches.
    watchdogSeconds: 120,
    resyncSeconds: 600,
    requestTimeoutSeconds: 30,
    logLevel: 'info',
  };
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Later layers win; nested objects merge field by field; `undefined` never overrides. */
export function mergeConfigLayers(...layers: ConfigLayer[]): ConfigLayer {
  const merged: Record<string, unknown> = {};
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer)) {
      if (value === undefined) continue;
      const current = merged[key];
      merged[key] = isPlainObject(value) && isPlainObject(current) ? { ...current, ...withoutUndefined(value) } : value;
    }
  }
  return merged as ConfigLayer;
}

/**
 * A setting that may be null (`ingress: null`) is a union: its own error says only "Expected union value". The
 * errors inside the member the value was meant for name the setting that is wrong (`ingress.host`).
 */
function withinUnion(error: ValueError): ValueError[] {
  const inner = error.errors.flatMap((member) => [...member]).filter((memberError) => memberError.path !== error.path);
  return inner.length > 0 ? inner.flatMap(withinUnion) : [error];
}

/** The complete configuration, or a ConfigError naming every missing or invalid setting. */
export function resolveConfig(...layers: ConfigLayer[]): OperatorConfig {
  const merged = mergeConfigLayers(defaultConfigLayer(), ...layers);
  const problems = [...Value.Errors(OperatorConfigSchema, merged)].flatMap(withinUnion).map((error) => {
    const field = error.path.slice(1).replace(/\//g, '.') || '(root)';
    return error.value === undefined ? `${field} is required` : `${field}: ${error.message} (got ${JSON.stringify(error.value)})`;
  });
  if (problems.length > 0) throw new ConfigError(`invalid operator configuration:\n${[...new Set(problems)].map((p) => `  - ${p}`).join('\n')}`);
  const config = merged as OperatorConfig;
  const election = config.leaderElection;
  if (!(election.retryPeriodSeconds < election.renewDeadlineSeconds && election.renewDeadlineSeconds < election.leaseDurationSeconds)) {
    throw new ConfigError('invalid operator configuration: leaderElection needs retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds');
  }
  const holder = config.holder;
  // Listing the held calls' records cannot be limited to them: in the key's namespace it would reach every Secret there.
  if (holder.enabled && holder.heldCallsNamespace === holder.serviceNamespace) {
    throw new ConfigError(`invalid operator configuration: holder.heldCallsNamespace must be a namespace of its own, not holder.serviceNamespace (${holder.serviceNamespace}), whose other Secrets the right to list held calls would reach`);
  }
  return config;
}

/** A --config file: YAML or JSON (JSON is YAML), holding any subset of the configuration. */
export async function readConfigFile(path: string): Promise<ConfigLayer> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read the operator configuration ${path}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`${path} is not valid YAML or JSON: ${(error as Error).message}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (!isPlainObject(parsed)) throw new ConfigError(`${path} must hold a mapping of settings`);
  return parsed as ConfigLayer;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function withoutUndefined(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined));
}

/** The results store's quotas as the collector applies them (results/namespace-quotas.ts): bytes, null for no limit. */
export function namespaceQuotaLimits(results: ResultsConfig): { defaults: QuotaLimits; namespaces: Map<string, Partial<QuotaLimits>> } {
  const limit = (value: number | undefined, unit: number): number | null | undefined => (value === undefined ? undefined : value === 0 ? null : value * unit);
  const namespaces = new Map<string, Partial<QuotaLimits>>();
  for (const [namespace, quotas] of Object.entries(results.namespaceQuotas)) {
    const limits = { runs: limit(quotas.maxRuns, 1), recordBytes: limit(quotas.maxRecordMiB, MIB), keptResultBytes: limit(quotas.maxKeptResultMiB, MIB) };
    namespaces.set(namespace, Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined)));
  }
  return {
    defaults: {
      runs: limit(results.maxRunsPerNamespace, 1) ?? null,
      recordBytes: limit(results.maxRecordMiBPerNamespace, MIB) ?? null,
      keptResultBytes: limit(results.maxKeptResultMiBPerNamespace, MIB) ?? null,
    },
    namespaces,
  };
}

/** What rendering child objects needs from the configuration, with the sidecar mode decided (sidecar-mode.ts). */
export type RenderConfig = Pick<OperatorConfig, 'sidecarImage' | 'pythonRuntimeImage' | 'webhookAllowCidrs' | 'imagePullSecrets' | 'ingress' | 'networkPolicy'> & {
  nativeSidecars: boolean;
  /** The results collector's origin when the operator has a results store (config.results.collectorUrl); else null. */
  resultsCollectorUrl: string | null;
};
export type NetworkPolicyConfig = Static<typeof NetworkPolicyConfigSchema>;
