// The App resource: the cluster form of an app folder's service.toml (crds/service-toml.ts converts).
//
// The static types describe an App as the apiserver stores it, after defaulting: a property with a
// `default` is required here and optional in the CRD (crds/structural-schema.ts drops it from `required`).
// Build a complete object from a partial one with `applyAppDefaults` (crds/validate.ts).
import { Type, type Static } from '@sinclair/typebox';
import { APP_KIND, RUNLET_API_VERSION } from './api-group.ts';
import { objectMetaSchema } from './object-meta-schema.ts';
import { RESULT_KEEP_BYTES_MAX } from './app-limits.ts';
import { DateTime, DnsLabel, DnsSubdomain, Quantity, StringEnum, Struct, exactlyOneOf, withRules } from './schema-kit.ts';


/** App names become Service and Deployment names and a path segment of the run interface. */
export const AppNameSchema = DnsLabel({ description: 'The app name: a DNS-1123 label.' });

export const CodeSourceSchema = Struct(
  {
    configMap: Type.Optional(
      Struct(
        { name: DnsSubdomain({ description: 'ConfigMap in the App namespace whose keys are the files of the app folder.' }) },
        { description: 'The code is mounted from a ConfigMap.' },
      ),
    ),
    baked: Type.Optional(Type.Literal(true, { description: 'The code is baked into the runtime image.' })),
  },
  {
    description: 'Where the Python code comes from: exactly one of configMap or baked.',
    ...withRules(exactlyOneOf('configMap', 'baked')),
  },
);

export const PythonRuntimeSchema = Struct(
  {
    image: Type.Optional(
      Type.String({ minLength: 1, description: 'The Python runtime image; the operator has a default.' }),
    ),
    module: Type.String({
      default: 'main',
      pattern: '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$',
      expected: 'a Python module name such as "main" or "pkg.app"',
      description: 'The module whose functions are the app.',
    }),
    code: CodeSourceSchema,
  },
  { description: 'Run the functions of a Python module with the Runlet Python runtime.' },
);

const HttpPath = (description: string) =>
  Type.String({ pattern: '^/', expected: 'an HTTP path starting with "/"', description });

/**
 * The sidecar's ports in every App pod (operator/render/names.ts): the app container shares the pod's network
 * namespace, so a custom server on one of them cannot listen and its pod crash-loops.
 */
export const SIDECAR_POD_PORTS = { run: 8000, admin: 8001 } as const;

export const CustomRuntimeSchema = Struct(
  {
    image: Type.String({ minLength: 1, description: 'The image of the app server.' }),
    entrypoint: Type.Optional(
      Type.Array(Type.String(), { minItems: 1, description: "Command and arguments; default: the image's entrypoint." }),
    ),
    port: Type.Integer({ minimum: 1, maximum: 65535, description: 'The port the app server listens on.' }),
    healthcheckEndpoint: Type.Optional(HttpPath('Liveness: a path answering 2xx while the server is alive.')),
    readycheckEndpoint: Type.Optional(HttpPath('Readiness: a path answering 2xx when the server takes requests.')),
  },
  {
    description: 'Run any HTTP server image; calls are forwarded to it unchanged.',
    ...withRules<{ port?: unknown }>({
      rule: `self.port != ${SIDECAR_POD_PORTS.run} && self.port != ${SIDECAR_POD_PORTS.admin}`,
      message: `{port} is one of the sidecar's ports in the app's pod (${SIDECAR_POD_PORTS.run} run, ${SIDECAR_POD_PORTS.admin} admin): the app server must listen on another`,
      field: 'port',
      holds: (custom) => custom.port !== SIDECAR_POD_PORTS.run && custom.port !== SIDECAR_POD_PORTS.admin,
    }),
  },
);

export const RuntimeSchema = Struct(
  {
    python: Type.Optional(PythonRuntimeSchema),
    custom: Type.Optional(CustomRuntimeSchema),
  },
  {
    description: 'Exactly one of python or custom.',
    ...withRules(exactlyOneOf('python', 'custom')),
  },
);

export const ResourcesSchema = Struct(
  {
    cpu: Type.Optional(Quantity({ description: 'CPU request and limit of the app container, e.g. 500m.' })),
    memory: Type.Optional(Quantity({ description: 'Memory request and limit of the app container, e.g. 512Mi.' })),
    gpu: Type.Optional(Type.Integer({ minimum: 0, description: 'GPUs (nvidia.com/gpu) of the app container.' })),
  },
  { description: 'Hardware of each replica ([hardware] in service.toml).' },
);

/** What `scalingTarget` measures; crds/app-schema.ts and the autoscaler (operator/autoscaling/) share it. */
export const SCALING_METRICS = ['concurrency_utilization', 'requests_per_second'] as const;

export const ScalingSchema = Struct(
  {
    minReplicas: Type.Integer({ minimum: 0, maximum: 100, default: 1, description: 'Fewest replicas; 0 lets an idle app scale to zero.' }),
    maxReplicas: Type.Integer({ minimum: 1, maximum: 100, default: 10, description: 'Most replicas the autoscaler starts.' }),
    replicaConcurrency: Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 4,
      description: 'Calls in flight per replica; more wait in a bounded queue.',
    }),
    responseGracePeriod: Type.Integer({
      minimum: 1,
      maximum: 43200,
      default: 900,
      unit: 'seconds',
      description: 'Longest a run may take (seconds, at most 12 h); also bounds the drain on shutdown.',
    }),
    cooldown: Type.Integer({
      minimum: 0,
      maximum: 3600,
      default: 60,
      unit: 'seconds',
      description: 'Seconds of lower load before replicas are removed, and of no call before an app with minReplicas 0 goes to zero.',
    }),
    scalingMetric: StringEnum(SCALING_METRICS, {
      default: 'concurrency_utilization',
      description: 'concurrency_utilization: calls in flight and queued as a share of replicaConcurrency; requests_per_second: calls started per second.',
    }),
    scalingTarget: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 100000,
        description:
          'Per-replica target of scalingMetric: a percentage of replicaConcurrency from 1 to 100 (default 70), or requests per second above 0 (default 10).',
      }),
    ),
    coldStartTimeout: Type.Integer({
      minimum: 1,
      maximum: 3600,
      default: 60,
      unit: 'seconds',
      description: 'Longest a call waits for a replica while the app is at zero; then 503 with Retry-After.',
    }),
  },
  {
    default: {},
    description: 'Replicas, autoscaling and per-replica admission ([scaling] in service.toml).',
    ...withRules<{ minReplicas?: number; maxReplicas?: number; scalingMetric?: string; scalingTarget?: number }>(
      {
        rule: '!has(self.minReplicas) || !has(self.maxReplicas) || self.maxReplicas >= self.minReplicas',
        message: '{maxReplicas} must be greater than or equal to {minReplicas}',
        field: 'maxReplicas',
        holds: (scaling) =>
          scaling.minReplicas === undefined ||
          scaling.maxReplicas === undefined ||
          scaling.maxReplicas >= scaling.minReplicas,
      },
      {
        // A utilisation: 0 % would ask for infinitely many replicas, over 100 % for more calls than a replica admits.
        rule:
          "!has(self.scalingTarget) || (has(self.scalingMetric) && self.scalingMetric == 'requests_per_second') || (self.scalingTarget >= 1.0 && self.scalingTarget <= 100.0)",
        message: '{scalingTarget} must be a percentage from 1 to 100 when {scalingMetric} is concurrency_utilization',
        field: 'scalingTarget',
        holds: (scaling) =>
          scaling.scalingTarget === undefined ||
          scaling.scalingMetric === 'requests_per_second' ||
          (scaling.scalingTarget >= 1 && scaling.scalingTarget <= 100),
      },
      {
        rule:
          "!has(self.scalingTarget) || !has(self.scalingMetric) || self.scalingMetric != 'requests_per_second' || self.scalingTarget > 0.0",
        message: '{scalingTarget} must be above 0 requests per second',
        field: 'scalingTarget',
        holds: (scaling) =>
          scaling.scalingTarget === undefined || scaling.scalingMetric !== 'requests_per_second' || scaling.scalingTarget > 0,
      },
    ),
  },
);

export const EnvVarSchema = Struct(
  {
    name: Type.String({
      pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
      expected: 'an environment variable name (letters, digits and "_", not starting with a digit)',
    }),
    value: Type.Optional(Type.String()),
    valueFrom: Type.Optional(
      Struct({
        secretKeyRef: Struct({
          name: DnsSubdomain({ description: 'Secret in the App namespace.' }),
          key: Type.String({
            pattern: '^[-._a-zA-Z0-9]+$',
            expected: 'a Secret key (letters, digits, "-", "_" and ".")',
          }),
        }),
      }),
    ),
  },
  withRules<{ value?: unknown; valueFrom?: unknown }>({
    rule: '!(has(self.value) && has(self.valueFrom))',
    message: '{value} and {valueFrom} are mutually exclusive',
    holds: (env) => !(env.value !== undefined && env.valueFrom !== undefined),
  }),
);

export const AuthSchema = Struct(
  {
    enabled: Type.Boolean({ default: true, description: 'Require a bearer token on the run interface.' }),
  },
  { default: {}, description: 'Authentication of the run interface (auth in [deployment] of service.toml).' },
);

export const RunsSchema = Struct(
  {
    keepFinished: Type.Integer({
      minimum: 1,
      maximum: 10000,
      default: 200,
      description: 'Finished runs each replica keeps in its RunLog.',
    }),
    retention: Type.Integer({
      minimum: 60,
      maximum: 2592000,
      default: 86400,
      unit: 'seconds',
      description: 'How long the RunLog of a vanished replica is kept (seconds, at most 30 days).',
    }),
    retentionDays: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 3650,
        description:
          "Days the results store keeps this App's runs (retention_days in [runs]); absent: the operator's default (the chart's results.retentionDays, 30).",
      }),
    ),
    keepResults: Type.Boolean({
      default: false,
      description:
        "Keep each run's result (or error) for resultTtl, returned by the management API's get of the run (keep_results in [runs]). Off by default: an async call's caller gets no output but its webhook's. The RunLog store never keeps results.",
    }),
    resultKeepBytes: Type.Integer({
      minimum: 1,
      maximum: RESULT_KEEP_BYTES_MAX,
      default: 1048576,
      unit: 'bytes',
      description: 'Largest result kept (result_keep_bytes in [runs]); a larger one is not kept, and its run says so (resultKept: false).',
    }),
    resultTtl: Type.Integer({
      minimum: 1,
      maximum: 2592000,
      default: 3600,
      unit: 'seconds',
      description: 'How long a kept result is returned (result_ttl in [runs], seconds, at most 30 days).',
    }),
  },
  { default: {}, description: 'Run history kept in RunLogs ([runs] in service.toml).' },
);

export const AppSpecSchema = Struct({
  runtime: RuntimeSchema,
  resources: Type.Optional(ResourcesSchema),
  scaling: ScalingSchema,
  env: Type.Optional(
    Type.Array(EnvVarSchema, {
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
      description: 'Environment of the app container.',
    }),
  ),
  auth: AuthSchema,
  runs: RunsSchema,
  pip: Type.Optional(
    Type.Array(Type.String({ minLength: 1 }), {
      description: 'pip requirement specifiers installed when an image is built ([dependencies.pip] packages).',
    }),
  ),
});

export const CONDITION_STATUS_VALUES = ['True', 'False', 'Unknown'] as const;

/** metav1.Condition, with the same validation as the Kubernetes type. */
export const ConditionSchema = Struct({
  type: Type.String({
    maxLength: 316,
    pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    expected: 'a condition type in CamelCase, e.g. "Ready"',
  }),
  status: StringEnum(CONDITION_STATUS_VALUES),
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0, format: 'int64' })),
  lastTransitionTime: DateTime(),
  reason: Type.String({
    minLength: 1,
    maxLength: 1024,
    pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    expected: 'a reason in CamelCase, e.g. "ImagePullFailed"',
  }),
  message: Type.String({ maxLength: 32768 }),
});

export const AppRunCountsSchema = Struct(
  {
    total: Type.Integer({ minimum: 0 }),
    success: Type.Integer({ minimum: 0 }),
    failure: Type.Integer({ minimum: 0 }),
    inFlight: Type.Integer({ minimum: 0 }),
    lastRunTime: Type.Optional(DateTime()),
  },
  { description: "Counters rolled up from the replicas' RunLogs." },
);

export const ScalingDecisionSchema = Struct(
  {
    time: DateTime(),
    from: Type.Integer({ minimum: 0, format: 'int32', description: 'Replicas wanted before the decision.' }),
    to: Type.Integer({ minimum: 0, format: 'int32', description: 'Replicas wanted after it.' }),
    reason: Type.String({ description: 'Why, in one CamelCase word: ScaledUp, Panic, Cooldown, ScaledToZero, ColdStart, Overridden, Fixed, ….' }),
    message: Type.String({ description: 'Why, for a person: the load measured and the target.' }),
  },
  { description: "The autoscaler's last change of the replicas wanted; for a fixed App, reason Fixed and when the count was set." },
);

export const ContainerRestartSchema = Struct(
  {
    time: DateTime({ description: 'When the kubelet noticed the restart (the operator saw the pod change).' }),
    pod: Type.String(),
    container: Type.String({ description: 'app (the runtime or custom server) or sidecar.' }),
    restartCount: Type.Integer({ minimum: 0, format: 'int32', description: "The container's restarts in that pod so far." }),
    exitCode: Type.Optional(Type.Integer({ format: 'int32', description: 'How its last run ended (128 + n: killed by signal n).' })),
    reason: Type.String({ description: "The kubelet's word for the end: Error, OOMKilled, Completed, …." }),
    message: Type.String({ description: 'What happened, for a person.' }),
  },
  { description: 'The last container of an App pod that ended and was restarted by the kubelet.' },
);

export const AppStatusSchema = Struct({
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0, format: 'int64' })),
  conditions: Type.Optional(
    Type.Array(ConditionSchema, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] }),
  ),
  replicas: Type.Optional(Type.Integer({ minimum: 0, format: 'int32' })),
  readyReplicas: Type.Optional(Type.Integer({ minimum: 0, format: 'int32' })),
  desiredReplicas: Type.Optional(Type.Integer({ minimum: 0, format: 'int32', description: 'Replicas wanted: the autoscaler’s for an autoscaled App, minReplicas for a fixed one (minReplicas = maxReplicas).' })),
  lastScaling: Type.Optional(ScalingDecisionSchema),
  url: Type.Optional(Type.String({ description: 'Base URL of the run interface for this app.' })),
  runs: Type.Optional(AppRunCountsSchema),
  lastRestart: Type.Optional(ContainerRestartSchema),
});

export const AppSchema = Struct({
  apiVersion: Type.Literal(RUNLET_API_VERSION),
  kind: Type.Literal(APP_KIND),
  metadata: objectMetaSchema(AppNameSchema),
  spec: AppSpecSchema,
  status: Type.Optional(AppStatusSchema),
});

export type App = Static<typeof AppSchema>;
export type AppSpec = Static<typeof AppSpecSchema>;
export type AppStatus = Static<typeof AppStatusSchema>;
export type ScalingDecisionRecord = Static<typeof ScalingDecisionSchema>;
export type ContainerRestart = Static<typeof ContainerRestartSchema>;
export type AppRuntime = Static<typeof RuntimeSchema>;
export type PythonRuntime = Static<typeof PythonRuntimeSchema>;
export type CustomRuntime = Static<typeof CustomRuntimeSchema>;
export type CodeSource = Static<typeof CodeSourceSchema>;
export type AppResources = Static<typeof ResourcesSchema>;
export type AppScaling = Static<typeof ScalingSchema>;
export type ScalingMetric = (typeof SCALING_METRICS)[number];
export type EnvVar = Static<typeof EnvVarSchema>;
export type AppAuth = Static<typeof AuthSchema>;
export type AppRuns = Static<typeof RunsSchema>;
export type Condition = Static<typeof ConditionSchema>;
export type ConditionStatus = (typeof CONDITION_STATUS_VALUES)[number];
export type AppRunCounts = Static<typeof AppRunCountsSchema>;
