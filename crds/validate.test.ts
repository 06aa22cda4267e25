import { evaluate } from '@marcbachmann/cel-js';
import type { TSchema } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { AppSpecSchema } from './app-schema.ts';
import { customApp, pythonApp, runLog } from '../test/support/crd-fixtures.ts';
import { crossFieldRulesOf } from './schema-kit.ts';
import {
  applyAppDefaults,
  parseApp,
  parseAppSpec,
  parseRunLog,
  ResourceValidationError,
  validateApp,
  validateAppSpec,
  validateRunLog,
} from './validate.ts';

/** `pythonApp()` with `change` applied to a copy of it. */
// `any`: the changes deliberately write values the App type forbids, which is what is being tested.
function appWith(change: (app: Record<string, any>) => void): unknown {
  const app = structuredClone(pythonApp()) as Record<string, any>;
  change(app);
  return app;
}

function messages(value: unknown): string[] {
  return validateApp(value).map((issue) => issue.message);
}

describe('validateApp: valid objects', () => {
  it('accepts a Python app and a custom app with every field', () => {
    expect(validateApp(pythonApp())).toEqual([]);
    expect(validateApp(customApp())).toEqual([]);
  });

  it('accepts a minimal Python app once defaults fill the rest', () => {
    const minimal = appWith((app) => {
      app.spec = { runtime: { python: { code: { baked: true } } } };
    });
    expect(validateApp(minimal)).toEqual([]);
  });
});

describe('validateApp: ranges', () => {
  // `any`: as in appWith.
  const cases: [string, (app: Record<string, any>) => void, string][] = [
    ['minReplicas below 0', (a) => (a.spec.scaling.minReplicas = -1), 'spec.scaling.minReplicas must be an integer from 0 to 100, got -1'],
    ['minReplicas above 100', (a) => (a.spec.scaling.minReplicas = 101), 'spec.scaling.minReplicas must be an integer from 0 to 100, got 101'],
    ['maxReplicas 0', (a) => (a.spec.scaling.maxReplicas = 0), 'spec.scaling.maxReplicas must be an integer from 1 to 100, got 0'],
    ['replicaConcurrency 0', (a) => (a.spec.scaling.replicaConcurrency = 0), 'spec.scaling.replicaConcurrency must be an integer from 1 to 1000, got 0'],
    ['replicaConcurrency 1001', (a) => (a.spec.scaling.replicaConcurrency = 1001), 'spec.scaling.replicaConcurrency must be an integer from 1 to 1000, got 1001'],
    ['responseGracePeriod 0', (a) => (a.spec.scaling.responseGracePeriod = 0), 'spec.scaling.responseGracePeriod must be an integer from 1 to 43200 seconds, got 0'],
    ['responseGracePeriod over 12 h', (a) => (a.spec.scaling.responseGracePeriod = 43201), 'spec.scaling.responseGracePeriod must be an integer from 1 to 43200 seconds, got 43201'],
    ['fractional responseGracePeriod', (a) => (a.spec.scaling.responseGracePeriod = 1.5), 'spec.scaling.responseGracePeriod must be an integer from 1 to 43200 seconds, got 1.5'],
    ['keepFinished 0', (a) => (a.spec.runs.keepFinished = 0), 'spec.runs.keepFinished must be an integer from 1 to 10000, got 0'],
    ['keepFinished 10001', (a) => (a.spec.runs.keepFinished = 10001), 'spec.runs.keepFinished must be an integer from 1 to 10000, got 10001'],
    ['retention under a minute', (a) => (a.spec.runs.retention = 59), 'spec.runs.retention must be an integer from 60 to 2592000 seconds, got 59'],
    ['negative gpu', (a) => (a.spec.resources = { gpu: -1 }), 'spec.resources.gpu must be an integer >= 0, got -1'],
    ['port 0', (a) => (a.spec.runtime = { custom: { image: 'x', port: 0 } }), 'spec.runtime.custom.port must be an integer from 1 to 65535, got 0'],
    ['port 65536', (a) => (a.spec.runtime = { custom: { image: 'x', port: 65536 } }), 'spec.runtime.custom.port must be an integer from 1 to 65535, got 65536'],
    ['a string for a number', (a) => (a.spec.scaling.minReplicas = '2'), 'spec.scaling.minReplicas must be an integer from 0 to 100, got "2"'],
  ];
  it.each(cases)('%s', (_, change, message) => {
    expect(messages(appWith(change))).toEqual([message]);
  });

  it('accepts the bounds themselves', () => {
    const app = appWith((a) => {
      a.spec.scaling = { minReplicas: 100, maxReplicas: 100, replicaConcurrency: 1000, responseGracePeriod: 43200 };
      a.spec.runs = { keepFinished: 1, retention: 2592000 };
    });
    expect(validateApp(app)).toEqual([]);
  });
});

describe('validateApp: enums, patterns and literals', () => {
  it('names the allowed values of an enum', () => {
    const app = customApp();
    app.status!.conditions![0]!.status = 'Maybe' as never;
    expect(messages(app)).toEqual(['status.conditions[0].status must be one of "True", "False", "Unknown", got "Maybe"']);
  });

  it('rejects a wrong apiVersion or kind', () => {
    expect(messages(appWith((a) => (a.apiVersion = 'runlet.dev/v1')))).toEqual(['apiVersion must be "runlet.dev/v1alpha1", got "runlet.dev/v1"']);
    expect(messages(appWith((a) => (a.kind = 'Deployment')))).toEqual(['kind must be "App", got "Deployment"']);
  });

  it('rejects baked: false (only true means anything)', () => {
    expect(messages(appWith((a) => (a.spec.runtime.python.code = { baked: false })))).toEqual([
      'spec.runtime.python.code.baked must be true, got false',
    ]);
  });

  it('explains patterns in words', () => {
    expect(messages(appWith((a) => (a.metadata.name = 'My_App')))).toEqual([
      'metadata.name must be a DNS-1123 label (at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit), got "My_App"',
    ]);
    expect(messages(appWith((a) => (a.spec.resources = { cpu: 'lots' })))).toEqual([
      'spec.resources.cpu must be a Kubernetes quantity such as "500m", "2", "1.5" or "512Mi", got "lots"',
    ]);
    expect(messages(appWith((a) => (a.spec.runtime.python.module = 'my-module')))).toEqual([
      'spec.runtime.python.module must be a Python module name such as "main" or "pkg.app", got "my-module"',
    ]);
    expect(messages(appWith((a) => (a.spec.env = [{ name: '1X', value: 'y' }])))).toEqual([
      'spec.env[0].name must be an environment variable name (letters, digits and "_", not starting with a digit), got "1X"',
    ]);
    expect(messages(appWith((a) => (a.spec.runtime = { custom: { image: 'x', port: 80, readycheckEndpoint: 'ready' } })))).toEqual([
      'spec.runtime.custom.readycheckEndpoint must be an HTTP path starting with "/", got "ready"',
    ]);
  });

  it('accepts quantities in every Kubernetes spelling', () => {
    for (const cpu of ['500m', '2', '1.5', '.5', '512Mi', '1Gi', '1e3', '100k']) {
      expect(validateApp(appWith((a) => (a.spec.resources = { cpu, memory: cpu })))).toEqual([]);
    }
    for (const cpu of ['-1', '1.5.2', '5 m', 'm', '']) {
      expect(validateApp(appWith((a) => (a.spec.resources = { cpu }))), cpu).toHaveLength(1);
    }
  });
});

describe('validateApp: required and unknown fields', () => {
  it('reports each missing required field', () => {
    const app = appWith((a) => (a.spec.runtime = { custom: {} }));
    expect(messages(app)).toEqual(['spec.runtime.custom.image is required', 'spec.runtime.custom.port is required']);
    expect(messages(appWith((a) => delete a.spec))).toEqual(['spec is required']);
    expect(messages(appWith((a) => delete a.metadata.name))).toEqual(['metadata.name is required']);
  });

  it('reports an unknown spec field and lists the known ones', () => {
    expect(messages(appWith((a) => (a.spec.scaling.replicas = 3)))).toEqual([
      'spec.scaling.replicas is not a known field (known: minReplicas, maxReplicas, replicaConcurrency, responseGracePeriod, cooldown, scalingMetric, scalingTarget, coldStartTimeout)',
    ]);
  });

  it('keeps metadata the apiserver owns', () => {
    const app = appWith((a) => Object.assign(a.metadata, { uid: 'u', managedFields: [{ manager: 'kubectl' }] }));
    expect(validateApp(app)).toEqual([]);
  });
});

describe('validateApp: cross-field rules', () => {
  it('wants exactly one of python or custom', () => {
    expect(messages(appWith((a) => (a.spec.runtime = {})))).toEqual([
      'spec.runtime: exactly one of spec.runtime.python or spec.runtime.custom must be set',
    ]);
    const both = appWith((a) => (a.spec.runtime.custom = { image: 'x', port: 80 }));
    expect(validateApp(both)).toEqual([
      { path: ['spec', 'runtime'], message: 'spec.runtime: exactly one of spec.runtime.python or spec.runtime.custom must be set' },
    ]);
  });

  it('wants exactly one code source', () => {
    expect(messages(appWith((a) => (a.spec.runtime.python.code = {})))).toEqual([
      'spec.runtime.python.code: exactly one of spec.runtime.python.code.configMap or spec.runtime.python.code.baked must be set',
    ]);
    expect(messages(appWith((a) => (a.spec.runtime.python.code.baked = true)))).toHaveLength(1);
  });

  it('refuses a custom server on the sidecar’s ports, which a real kubelet leaves crash-looping', () => {
    for (const port of [8000, 8001] as const) {
      const app = customApp();
      app.spec.runtime.custom!.port = port;
      expect(validateApp(app)).toEqual([
        {
          path: ['spec', 'runtime', 'custom', 'port'],
          message: `spec.runtime.custom.port (${port}) is one of the sidecar's ports in the app's pod (8000 run, 8001 admin): the app server must listen on another`,
        },
      ]);
    }
  });

  it('wants maxReplicas >= minReplicas, also when maxReplicas is the default', () => {
    expect(validateApp(appWith((a) => Object.assign(a.spec.scaling, { minReplicas: 3, maxReplicas: 2 })))).toEqual([
      {
        path: ['spec', 'scaling', 'maxReplicas'],
        message: 'spec.scaling.maxReplicas (2) must be greater than or equal to spec.scaling.minReplicas (3)',
      },
    ]);
    expect(messages(appWith((a) => (a.spec.scaling = { minReplicas: 11 })))).toEqual([
      'spec.scaling.maxReplicas (10) must be greater than or equal to spec.scaling.minReplicas (11)',
    ]);
  });

  it('wants scalingTarget within the range of its metric', () => {
    expect(validateApp(appWith((a) => Object.assign(a.spec.scaling, { scalingTarget: 0 })))).toEqual([
      {
        path: ['spec', 'scaling', 'scalingTarget'],
        message: 'spec.scaling.scalingTarget (0) must be a percentage from 1 to 100 when spec.scaling.scalingMetric is concurrency_utilization',
      },
    ]);
    expect(messages(appWith((a) => Object.assign(a.spec.scaling, { scalingMetric: 'requests_per_second', scalingTarget: 0 })))).toEqual([
      'spec.scaling.scalingTarget (0) must be above 0 requests per second',
    ]);
    expect(messages(appWith((a) => Object.assign(a.spec.scaling, { scalingMetric: 'requests_per_second', scalingTarget: 500 })))).toEqual([]);
    expect(messages(appWith((a) => Object.assign(a.spec.scaling, { scalingMetric: 'cpu' })))).toEqual([
      'spec.scaling.scalingMetric must be one of "concurrency_utilization", "requests_per_second", got "cpu"',
    ]);
  });

  it('rejects an env var with both value and valueFrom, and duplicate names', () => {
    const secret = { secretKeyRef: { name: 's', key: 'k' } };
    expect(messages(appWith((a) => (a.spec.env = [{ name: 'A', value: 'x', valueFrom: secret }])))).toEqual([
      'spec.env[0]: spec.env[0].value and spec.env[0].valueFrom are mutually exclusive',
    ]);
    expect(messages(appWith((a) => (a.spec.env = [{ name: 'A', value: 'x' }, { name: 'B' }, { name: 'A', valueFrom: secret }])))).toEqual([
      'spec.env[2].name duplicates spec.env[0].name ("A")',
    ]);
  });

  it('applies rules only once an object passes its schema, as CEL does', () => {
    const app = appWith((a) => (a.spec.scaling = { minReplicas: 5, maxReplicas: 2, responseGracePeriod: 0 }));
    expect(messages(app)).toEqual(['spec.scaling.responseGracePeriod must be an integer from 1 to 43200 seconds, got 0']);
  });
});

describe('CEL rules and their TypeScript twins', () => {
  // Every rule in the App spec, with objects on both sides of it. A new rule without samples fails here.
  const samples: Record<string, Record<string, unknown>[]> = {
    'spec.runtime': [{}, { python: {} }, { custom: {} }, { python: {}, custom: {} }],
    'spec.runtime.python.code': [{}, { configMap: { name: 'c' } }, { baked: true }, { configMap: { name: 'c' }, baked: true }],
    'spec.scaling': [
      {},
      { minReplicas: 1 },
      { minReplicas: 1, maxReplicas: 1 },
      { minReplicas: 0, maxReplicas: 5 },
      { minReplicas: 4, maxReplicas: 3 },
      { scalingTarget: 70 },
      { scalingTarget: 0.5 },
      { scalingTarget: 101, scalingMetric: 'concurrency_utilization' },
      { scalingTarget: 1, scalingMetric: 'concurrency_utilization' },
      { scalingTarget: 0.5, scalingMetric: 'requests_per_second' },
      { scalingTarget: 0, scalingMetric: 'requests_per_second' },
      { scalingMetric: 'requests_per_second' },
    ],
    'spec.runtime.custom': [{ image: 'x', port: 8000 }, { image: 'x', port: 8001 }, { image: 'x', port: 8002 }, { image: 'x', port: 7999 }],
    'spec.env[]': [{ name: 'A' }, { name: 'A', value: 'x' }, { name: 'A', valueFrom: {} }, { name: 'A', value: 'x', valueFrom: {} }],
  };

  function schemasWithRules(schema: TSchema, path: string): [string, TSchema][] {
    const own: [string, TSchema][] = crossFieldRulesOf(schema).length > 0 ? [[path, schema]] : [];
    const properties = Object.entries((schema.properties ?? {}) as Record<string, TSchema>);
    const items = schema.type === 'array' ? schemasWithRules(schema.items as TSchema, `${path}[]`) : [];
    return [...own, ...items, ...properties.flatMap(([key, child]) => schemasWithRules(child, `${path}.${key}`))];
  }

  const found = schemasWithRules(AppSpecSchema, 'spec');

  it('has samples for every rule', () => {
    expect(found.map(([path]) => path).sort()).toEqual(Object.keys(samples).sort());
  });

  it.each(found)('%s: CEL and TypeScript agree on every sample', (path, schema) => {
    const celRules = schema['x-kubernetes-validations'] as { rule: string }[];
    crossFieldRulesOf(schema).forEach((rule, i) => {
      expect(celRules[i]!.rule).toBe(rule.rule);
      for (const self of samples[path]!) {
        expect(evaluate(rule.rule, { self }), `${rule.rule} on ${JSON.stringify(self)}`).toBe(rule.holds(self));
      }
    });
  });
});

describe('defaults', () => {
  it('fills every default, nested ones included, without touching the input', () => {
    const input = { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name: 'x' }, spec: { runtime: { python: { code: { baked: true } } } } };
    const before = structuredClone(input);
    expect(applyAppDefaults(input)).toEqual({
      ...input,
      spec: {
        runtime: { python: { module: 'main', code: { baked: true } } },
        scaling: {
          minReplicas: 1,
          maxReplicas: 10,
          replicaConcurrency: 4,
          responseGracePeriod: 900,
          cooldown: 60,
          scalingMetric: 'concurrency_utilization',
          coldStartTimeout: 60,
        },
        auth: { enabled: true },
        runs: { keepFinished: 200, retention: 86400, keepResults: false, resultKeepBytes: 1048576, resultTtl: 3600 },
      },
    });
    expect(input).toEqual(before);
  });

  it('keeps values that are set and adds no Python defaults to a custom runtime', () => {
    const spec = parseAppSpec({ runtime: { custom: { image: 'x', port: 80 } }, scaling: { maxReplicas: 5 }, auth: { enabled: false } });
    expect(spec.runtime).toEqual({ custom: { image: 'x', port: 80 } });
    expect(spec.scaling).toEqual({
      minReplicas: 1,
      maxReplicas: 5,
      replicaConcurrency: 4,
      responseGracePeriod: 900,
      cooldown: 60,
      scalingMetric: 'concurrency_utilization',
      coldStartTimeout: 60,
    });
    expect(spec.auth).toEqual({ enabled: false });
  });
});

describe('parseApp, parseRunLog and custom names', () => {
  it('returns the defaulted object or throws with every issue', () => {
    expect(parseApp(pythonApp())).toEqual(pythonApp());
    const bad = appWith((a) => Object.assign(a.spec.scaling, { minReplicas: -1, replicaConcurrency: 0 }));
    const error = (() => {
      try {
        parseApp(bad);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(ResourceValidationError);
    expect((error as ResourceValidationError).issues.map((issue) => issue.path.join('.'))).toEqual([
      'spec.scaling.minReplicas',
      'spec.scaling.replicaConcurrency',
    ]);
    expect((error as Error).message).toMatch(/^invalid App "hello":\n {2}- spec\.scaling\.minReplicas must be/);
  });

  it('validates RunLogs and their run records', () => {
    expect(validateRunLog(runLog())).toEqual([]);
    expect(parseRunLog(runLog())).toEqual(runLog());
    const log = runLog();
    Object.assign(log.status!.runs[0]!, { status: 'done', createdAt: 'yesterday', reason: 'bored' });
    expect(validateRunLog(log).map((issue) => issue.message)).toEqual([
      'status.runs[0].status must be one of "pending", "running", "success", "failure", "cancelled", got "done"',
      'status.runs[0].reason must be one of "timeout", "shutdown", "replica_lost", "runtime_crashed", "client_closed", "client_stalled", "cancel_requested", "upstream_error" or null, got "bored"',
      'status.runs[0].createdAt must be an RFC 3339 date-time such as "2025-01-31T12:00:00Z", got "yesterday"',
    ]);
  });

  it('names fields with the caller’s naming function', () => {
    const issues = validateAppSpec({ runtime: { custom: { image: 'x', port: 0 } } }, { nameOf: (path) => `<${path.join('/')}>` });
    expect(issues).toEqual([{ path: ['spec', 'runtime', 'custom', 'port'], message: '<spec/runtime/custom/port> must be an integer from 1 to 65535, got 0' }]);
  });
});
