// Where each service.toml key lives in an App spec. One table serves both directions of the converter and
// names App fields in service.toml's words in error messages.

export interface TomlField {
  /** The TOML table, dotted: 'runtime.custom'. */
  table: string;
  key: string;
  /** Path inside App.spec. */
  specPath: readonly string[];
  /** Only meaningful for this runtime (a warning says so when set with the other). */
  runtime?: 'python';
  /** The App value for a TOML value where service.toml allows a shorter spelling; otherwise unchanged. */
  fromToml?: (value: unknown) => unknown;
  /** The TOML value for an App value, inverse of `fromToml`. */
  toToml?: (value: unknown) => unknown;
}

/** Docker's shell form: a string entrypoint runs with /bin/sh -c, an array is the command itself. */
const SHELL = ['/bin/sh', '-c'] as const;

function entrypointFromToml(value: unknown): unknown {
  return typeof value === 'string' ? [...SHELL, value] : value;
}

function entrypointToToml(value: unknown): unknown {
  const isShellForm = Array.isArray(value) && value.length === 3 && value[0] === SHELL[0] && value[1] === SHELL[1];
  return isShellForm ? value[2] : value;
}

/** `cpu = 2` and `cpu = 0.5` read naturally in TOML; the App holds quantities as strings. */
function quantityFromToml(value: unknown): unknown {
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : value;
}

export const TOML_FIELDS: readonly TomlField[] = [
  { table: 'deployment', key: 'module', specPath: ['runtime', 'python', 'module'], runtime: 'python' },
  { table: 'deployment', key: 'auth', specPath: ['auth', 'enabled'] },
  { table: 'runtime.custom', key: 'image', specPath: ['runtime', 'custom', 'image'] },
  {
    table: 'runtime.custom',
    key: 'entrypoint',
    specPath: ['runtime', 'custom', 'entrypoint'],
    fromToml: entrypointFromToml,
    toToml: entrypointToToml,
  },
  { table: 'runtime.custom', key: 'port', specPath: ['runtime', 'custom', 'port'] },
  { table: 'runtime.custom', key: 'healthcheck_endpoint', specPath: ['runtime', 'custom', 'healthcheckEndpoint'] },
  { table: 'runtime.custom', key: 'readycheck_endpoint', specPath: ['runtime', 'custom', 'readycheckEndpoint'] },
  { table: 'hardware', key: 'cpu', specPath: ['resources', 'cpu'], fromToml: quantityFromToml },
  { table: 'hardware', key: 'memory', specPath: ['resources', 'memory'], fromToml: quantityFromToml },
  { table: 'hardware', key: 'gpu', specPath: ['resources', 'gpu'] },
  { table: 'scaling', key: 'min_replicas', specPath: ['scaling', 'minReplicas'] },
  { table: 'scaling', key: 'max_replicas', specPath: ['scaling', 'maxReplicas'] },
  { table: 'scaling', key: 'replica_concurrency', specPath: ['scaling', 'replicaConcurrency'] },
  { table: 'scaling', key: 'response_grace_period', specPath: ['scaling', 'responseGracePeriod'] },
  { table: 'scaling', key: 'cooldown', specPath: ['scaling', 'cooldown'] },
  { table: 'scaling', key: 'scaling_metric', specPath: ['scaling', 'scalingMetric'] },
  { table: 'scaling', key: 'scaling_target', specPath: ['scaling', 'scalingTarget'] },
  { table: 'scaling', key: 'cold_start_timeout', specPath: ['scaling', 'coldStartTimeout'] },
  { table: 'runs', key: 'keep_finished', specPath: ['runs', 'keepFinished'] },
  { table: 'runs', key: 'retention', specPath: ['runs', 'retention'] },
  { table: 'runs', key: 'retention_days', specPath: ['runs', 'retentionDays'] },
  { table: 'runs', key: 'keep_results', specPath: ['runs', 'keepResults'] },
  { table: 'runs', key: 'result_keep_bytes', specPath: ['runs', 'resultKeepBytes'] },
  { table: 'runs', key: 'result_ttl', specPath: ['runs', 'resultTtl'] },
  { table: 'dependencies.pip', key: 'packages', specPath: ['pip'] },
];

/** Keys handled outside TOML_FIELDS: the app name is metadata, env is a table of arbitrary names. */
export const NAME_KEY = { table: 'deployment', key: 'name' } as const;
export const ENV_TABLE = 'deployment.env';

/** Every table service.toml knows, including the ones that only hold other tables. */
export const KNOWN_TABLES: ReadonlySet<string> = new Set([
  'deployment',
  ENV_TABLE,
  'runtime',
  'runtime.custom',
  'hardware',
  'scaling',
  'runs',
  'dependencies',
  'dependencies.pip',
]);

export function knownKeysOf(table: string): ReadonlySet<string> {
  const keys = TOML_FIELDS.filter((field) => field.table === table).map((field) => field.key);
  if (table === NAME_KEY.table) keys.push(NAME_KEY.key);
  return new Set(keys);
}
