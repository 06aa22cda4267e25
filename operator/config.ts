// The operator's configuration: what it renders into every pod (images, ingress, sidecar mode), how it elects
// a leader, how it looks after RunLogs, and where it serves health, metrics and the management API. Layers merge in order — defaults, the --config file
// (YAML or JSON), environment, flags — and the result is validated once, with every problem listed.
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_HOLD_LIMITS } from '../activator/hold-bounds.ts';

const MIB = 1024 * 1024;
const Seconds = (description: string) => Type.Number({ exclusiveMinimum: 0, description });
const Image = (description: string) => Type.String({ minLength: 1, description });
const StrictObject = <T extends Record<string, TSchema>>(properties: T) => Type.Object(properties, { additionalProperties: false });

export const IngressConfigSchema = StrictObject({
  className: Type.Optional(Type.String({ minLength: 1, description: 'spec.ingressClassName of every Ingress.' })),
  host: Type.Optional(Type.String({ minLength: 1, description: 'The host every app is reached on (path /v4/<namespace>/<app>).' })),
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

export const ResultsConfigSchema = StrictObject({
  retentionDays: Type.Integer({ minimum: 1, maximum: 3650, description: 'Days the results store keeps the runs of an App that sets no spec.runs.retentionDays.' }),
  pruneIntervalSeconds: Seconds('How often the leader deletes the runs past their retention (in batches).'),
  pruneBatchSize: Type.Integer({ minimum: 1, maximum: 100_000, description: 'Rows deleted per statement by the retention job.' }),
  sweepSeconds: Seconds('How often the leader marks the runs left in flight by gone pods replica_lost.'),
  presenceSeconds: Seconds('How often each operator replica marks itself present in the results store; one that misses three marks is gone, and the webhooks it was delivering (of held calls it cancelled) are closed as not delivered.'),
  collectorUrl: Type.Union([Type.String({ minLength: 1 }), Type.Null()], {
    description:
      "Where sidecars send their run records (the operator Service's origin, e.g. http://runlet-operator.runlet-system.svc:8080): set, pods run `--run-store results`; null: they write RunLogs.",
  }),
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
  ingressController: Type.Object(
    { namespaceSelector: LabelSelectorSchema, podSelector: Type.Optional(LabelSelectorSchema) },
    { additionalProperties: false, description: 'The ingress controller’s pods: they may call the run port.' },
  ),
  runFromNamespaces: Type.Array(Type.String({ minLength: 1 }), { description: 'Namespaces (by name) whose pods may call the run port too.' }),
  metricsFromNamespaces: Type.Array(Type.String({ minLength: 1 }), { description: 'Namespaces (by name) whose pods may scrape the admin port (Prometheus); none: no pod may.' }),
  operatorPods: Type.Object(
    { namespace: Type.String({ minLength: 1 }), matchLabels: Labels },
    { additionalProperties: false, description: 'The operator pods: the holder in them hands held calls to the run port.' },
  ),
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
    description: 'A NetworkPolicy per App admitting run traffic only from these peers (render/network-policy.ts); null: none.',
  }),
  leaderElection: LeaderElectionConfigSchema,
  server: StrictObject({
    host: Type.String({ minLength: 1 }),
    port: Type.Integer({ minimum: 0, maximum: 65535, description: 'Port of /healthz, /ready, /metrics and the management API (/v2).' }),
  }),
  runLogs: RunLogsConfigSchema,
  results: ResultsConfigSchema,
  autoscaling: AutoscalingConfigSchema,
  holder: HolderConfigSchema,
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
    // Off: which pods are the ingress controller is the cluster's, and a policy without it would cut every call.
    networkPolicy: null,
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
    server: { host: '0.0.0.0', port: 8080 },
    // A vanished pod is usually noticed by its watch event at once; the sweep catches the rest and retention.
    runLogs: { sweepSeconds: 60, countersIntervalSeconds: 10 },
    results: { retentionDays: 30, pruneIntervalSeconds: 3600, pruneBatchSize: 1000, sweepSeconds: 30, presenceSeconds: 5, collectorUrl: null },
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

/** The complete configuration, or a ConfigError naming every missing or invalid setting. */
export function resolveConfig(...layers: ConfigLayer[]): OperatorConfig {
  const merged = mergeConfigLayers(defaultConfigLayer(), ...layers);
  const problems = [...Value.Errors(OperatorConfigSchema, merged)].map((error) => {
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

/** What rendering child objects needs from the configuration, with the sidecar mode decided (sidecar-mode.ts). */
export type RenderConfig = Pick<OperatorConfig, 'sidecarImage' | 'pythonRuntimeImage' | 'webhookAllowCidrs' | 'imagePullSecrets' | 'ingress' | 'networkPolicy'> & {
  nativeSidecars: boolean;
  /** The results collector's origin when the operator has a results store (config.results.collectorUrl); else null. */
  resultsCollectorUrl: string | null;
};
export type NetworkPolicyConfig = Static<typeof NetworkPolicyConfigSchema>;
