import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { App } from './app-schema.ts';
import { customApp, pythonApp } from '../test/support/crd-fixtures.ts';
import {
  appToServiceToml,
  codeConfigMapName,
  loadAppDir,
  parseServiceToml,
  serviceTomlToApp,
  ServiceTomlError,
} from './service-toml.ts';
import { validateApp } from './validate.ts';

const FULL_CUSTOM = `
[deployment]
name = "hello"
auth = false
[deployment.env]
GREETING = "hi"

[runtime.custom]
image = "ghcr.io/x/y:1"
entrypoint = ["node", "server.js"]
port = 8080
healthcheck_endpoint = "/health"
readycheck_endpoint = "/ready"

[hardware]
cpu = "500m"
memory = "512Mi"
gpu = 1

[scaling]
min_replicas = 2
max_replicas = 3
replica_concurrency = 8
response_grace_period = 1800
cooldown = 120
scaling_metric = "requests_per_second"
scaling_target = 2.5
cold_start_timeout = 30

[runs]
keep_finished = 50
retention = 3600
keep_results = true
result_keep_bytes = 4096
result_ttl = 600

[dependencies.pip]
packages = ["numpy==2.1.0", "requests"]
`;

const FULL_PYTHON = `
[deployment]
name = "py"
module = "pkg.app"
auth = true

[scaling]
min_replicas = 0
max_replicas = 1

[dependencies.pip]
packages = ["numpy==2.1.0"]
`;

const options = { defaultName: 'folder', namespace: 'team-a' };

function errorOf(run: () => unknown): ServiceTomlError {
  try {
    run();
  } catch (error) {
    if (error instanceof ServiceTomlError) return error;
    throw error;
  }
  throw new Error('expected a ServiceTomlError');
}

describe('service.toml → App', () => {
  it('maps every key of a custom-runtime app', () => {
    const app = serviceTomlToApp(FULL_CUSTOM, options);
    expect(app).toEqual({
      apiVersion: 'runlet.dev/v1alpha1',
      kind: 'App',
      metadata: { name: 'hello', namespace: 'team-a' },
      spec: {
        runtime: {
          custom: {
            image: 'ghcr.io/x/y:1',
            entrypoint: ['node', 'server.js'],
            port: 8080,
            healthcheckEndpoint: '/health',
            readycheckEndpoint: '/ready',
          },
        },
        resources: { cpu: '500m', memory: '512Mi', gpu: 1 },
        scaling: {
          minReplicas: 2,
          maxReplicas: 3,
          replicaConcurrency: 8,
          responseGracePeriod: 1800,
          cooldown: 120,
          scalingMetric: 'requests_per_second',
          scalingTarget: 2.5,
          coldStartTimeout: 30,
        },
        env: [
          { name: 'GREETING', value: 'hi' }],
        auth: { enabled: false },
        runs: { keepFinished: 50, retention: 3600, keepResults: true, resultKeepBytes: 4096, resultTtl: 600 },
        pip: ['numpy==2.1.0', 'requests'],
      },
    });
  });

  it('maps a Python app, shipping its code in the <name>-code ConfigMap', () => {
    const app = serviceTomlToApp(FULL_PYTHON, options);
    expect(app.spec.runtime).toEqual({ python: { module: 'pkg.app', code: { configMap: { name: codeConfigMapName('py') } } } });
    expect(codeConfigMapName('py')).toBe('py-code');
    expect(validateApp(app)).toEqual([]);
  });

  it('applies every default to an empty file and names the app after the folder', () => {
    expect(parseServiceToml('', { defaultName: 'my-app' })).toEqual({
      name: 'my-app',
      spec: {
        runtime: { python: { module: 'main', code: { configMap: { name: 'my-app-code' } } } },
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
      warnings: [],
    });
  });

  it('reads a string entrypoint as a shell command and numeric cpu/memory as quantities', () => {
    const { spec } = parseServiceToml('[runtime.custom]\nentrypoint = "node server.js --port $PORT"\nport = 80\n[hardware]\ncpu = 0.5\nmemory = 1e9', options);
    expect(spec.runtime.custom?.entrypoint).toEqual(['/bin/sh', '-c', 'node server.js --port $PORT']);
    expect(spec.resources).toEqual({ cpu: '0.5', memory: '1000000000' });
  });

  it('lets runlet dev run a custom app without image, but not deploy it', () => {
    const toml = '[runtime.custom]\nentrypoint = ["python", "-m", "http.server"]\nport = 8000';
    expect(parseServiceToml(toml, options).spec.runtime.custom).toEqual({ entrypoint: ['python', '-m', 'http.server'], port: 8000 });
    expect(errorOf(() => serviceTomlToApp(toml, options)).message).toBe(
      'service.toml: [runtime.custom] image is required to deploy (only runlet dev runs the folder without one)',
    );
  });
});

describe('invalid values name their key and what is allowed', () => {
  const cases: [string, string][] = [
    ['[scaling]\nresponse_grace_period = 0', '[scaling] response_grace_period must be an integer from 1 to 43200 seconds, got 0'],
    ['[scaling]\nresponse_grace_period = 43201', '[scaling] response_grace_period must be an integer from 1 to 43200 seconds, got 43201'],
    ['[scaling]\nmin_replicas = -1', '[scaling] min_replicas must be an integer from 0 to 100, got -1'],
    ['[scaling]\nmax_replicas = 101', '[scaling] max_replicas must be an integer from 1 to 100, got 101'],
    ['[scaling]\nmin_replicas = 3\nmax_replicas = 2', '[scaling] max_replicas (2) must be greater than or equal to [scaling] min_replicas (3)'],
    ['[scaling]\nmin_replicas = 11', '[scaling] max_replicas (10) must be greater than or equal to [scaling] min_replicas (11)'],
    ['[scaling]\nmax_replicas = 0', '[scaling] max_replicas must be an integer from 1 to 100, got 0'],
    ['[scaling]\ncooldown = -1', '[scaling] cooldown must be an integer from 0 to 3600 seconds, got -1'],
    ['[scaling]\ncold_start_timeout = 0', '[scaling] cold_start_timeout must be an integer from 1 to 3600 seconds, got 0'],
    ['[scaling]\nscaling_metric = "cpu"', '[scaling] scaling_metric must be one of "concurrency_utilization", "requests_per_second", got "cpu"'],
    ['[scaling]\nscaling_target = 150', '[scaling] scaling_target (150) must be a percentage from 1 to 100 when [scaling] scaling_metric is concurrency_utilization'],
    ['[scaling]\nscaling_target = 0.5', '[scaling] scaling_target (0.5) must be a percentage from 1 to 100 when [scaling] scaling_metric is concurrency_utilization'],
    ['[scaling]\nscaling_metric = "requests_per_second"\nscaling_target = 0', '[scaling] scaling_target (0) must be above 0 requests per second'],
    ['[scaling]\nscaling_target = "high"', '[scaling] scaling_target must be a number from 0 to 100000, got "high"'],
    ['[scaling]\nreplica_concurrency = 0', '[scaling] replica_concurrency must be an integer from 1 to 1000, got 0'],
    ['[scaling]\nreplica_concurrency = "4"', '[scaling] replica_concurrency must be an integer from 1 to 1000, got "4"'],
    ['[scaling]\nreplica_concurrency = 2.5', '[scaling] replica_concurrency must be an integer from 1 to 1000, got 2.5'],
    ['[runs]\nkeep_finished = 0', '[runs] keep_finished must be an integer from 1 to 10000, got 0'],
    ['[runs]\nretention = 10', '[runs] retention must be an integer from 60 to 2592000 seconds, got 10'],
    ['[runs]\nkeep_results = "yes"', '[runs] keep_results must be true or false, got "yes"'],
    ['[runs]\nresult_keep_bytes = 0', '[runs] result_keep_bytes must be an integer from 1 to 16777216 bytes, got 0'],
    ['[runs]\nresult_ttl = 0', '[runs] result_ttl must be an integer from 1 to 2592000 seconds, got 0'],
    ['[runs]\nresult_ttl = 1.5', '[runs] result_ttl must be an integer from 1 to 2592000 seconds, got 1.5'],
    ['[hardware]\ncpu = "lots"', '[hardware] cpu must be a Kubernetes quantity such as "500m", "2", "1.5" or "512Mi", got "lots"'],
    ['[hardware]\nmemory = "-1Gi"', '[hardware] memory must be a Kubernetes quantity such as "500m", "2", "1.5" or "512Mi", got "-1Gi"'],
    ['[hardware]\ngpu = -1', '[hardware] gpu must be an integer >= 0, got -1'],
    ['[deployment]\nauth = "yes"', '[deployment] auth must be true or false, got "yes"'],
    ['[deployment]\nmodule = "my-app"', '[deployment] module must be a Python module name such as "main" or "pkg.app", got "my-app"'],
    ['[deployment]\nname = "Hello_World"', '[deployment] name must be a DNS-1123 label (at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit), got "Hello_World"'],
    ['[deployment]\nname = 5', '[deployment] name must be a DNS-1123 label (at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit), got 5'],
    ['[deployment.env]\nPORT = 8080', '[deployment.env] PORT must be a string, got 8080'],
    ['[deployment.env]\n"A.B" = "x"', '[deployment.env] key must be an environment variable name (letters, digits and "_", not starting with a digit), got "A.B"'],
    ['[deployment.env]\n"1X" = "y"', '[deployment.env] key must be an environment variable name (letters, digits and "_", not starting with a digit), got "1X"'],
    ['[runtime.custom]\nimage = "i"\nport = 0', '[runtime.custom] port must be an integer from 1 to 65535, got 0'],
    ['[runtime.custom]\nimage = "i"\nport = 70000', '[runtime.custom] port must be an integer from 1 to 65535, got 70000'],
    ['[runtime.custom]\nimage = "i"', '[runtime.custom] port is required'],
    ['[runtime.custom]\nimage = ""\nport = 80', '[runtime.custom] image must be a non-empty string, got ""'],
    ['[runtime.custom]\nimage = "i"\nport = 80\nentrypoint = 5', '[runtime.custom] entrypoint must be a command string (run with /bin/sh -c) or an array of strings, got 5'],
    ['[runtime.custom]\nimage = "i"\nport = 80\nentrypoint = []', '[runtime.custom] entrypoint must be a non-empty array (each item a string), got []'],
    ['[runtime.custom]\nimage = "i"\nport = 80\nentrypoint = ["node", 1]', '[runtime.custom] entrypoint[1] must be a string, got 1'],
    ['[runtime.custom]\nimage = "i"\nport = 80\nhealthcheck_endpoint = "health"', '[runtime.custom] healthcheck_endpoint must be an HTTP path starting with "/", got "health"'],
    ['[runtime.custom]\nimage = "i"\nport = 80\nreadycheck_endpoint = 1', '[runtime.custom] readycheck_endpoint must be an HTTP path starting with "/", got 1'],
    ['[dependencies.pip]\npackages = "numpy"', '[dependencies.pip] packages must be an array (each item a non-empty string), got "numpy"'],
    ['[dependencies.pip]\npackages = ["numpy", ""]', '[dependencies.pip] packages[1] must be a non-empty string, got ""'],
    ['scaling = 3', 'scaling must be a table ([scaling]), got 3'],
    ['[deployment]\nenv = "A=1"', 'deployment.env must be a table ([deployment.env]), got "A=1"'],
  ];

  it.each(cases)('%s', (toml, issue) => {
    const error = errorOf(() => serviceTomlToApp(toml, options));
    expect(error.issues).toEqual([issue]);
    expect(error.message).toBe(`service.toml: ${issue}`);
  });

  it('reports every problem at once, one line each', () => {
    const error = errorOf(() => serviceTomlToApp('[scaling]\nmin_replicas = -1\nreplica_concurrency = 0', options));
    expect(error.message.split('\n')).toEqual([
      'service.toml: [scaling] min_replicas must be an integer from 0 to 100, got -1',
      'service.toml: [scaling] replica_concurrency must be an integer from 1 to 1000, got 0',
    ]);
  });

  it('says when the folder name cannot be the app name', () => {
    const error = errorOf(() => parseServiceToml('', { defaultName: 'My_App' }));
    expect(error.issues).toEqual([
      'the app name defaults to the folder name "My_App", which is not a DNS-1123 label (at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit); set [deployment] name',
    ]);
    expect(parseServiceToml('[deployment]\nname = "my-app"', { defaultName: 'My_App' }).name).toBe('my-app');
  });

  it('gives TOML syntax errors a line and column', () => {
    const error = errorOf(() => parseServiceToml('[deployment]\nname = "x"\nauth = tru\n', { defaultName: 'x' }));
    expect([error.line, error.column]).toEqual([3, 8]);
    expect(error.message).toMatch(/^service\.toml:3:8: invalid TOML: .+\n/);
    expect(error.message).toContain('auth = tru');
  });
});

describe('unknown keys and sections', () => {
  it('warns about each, by name, and ignores it', () => {
    const toml = [
      'stray = 1',
      '[deployment]\nname = "x"\nreplicas = 2',
      '[scaling]\nreplicas = 3',
      '[runtime.python]\nversion = "3.12"',
      '[hardware.extra]\nx = 1',
      '[dependencies.npm]\npackages = []',
      '[dependencies.pip]\npackages = []\nindex_url = "u"',
      '[frobnicate]\nx = 1',
    ].join('\n');
    const parsed = parseServiceToml(toml, { defaultName: 'x' });
    expect(parsed.warnings).toEqual([
      'unknown key stray (ignored)',
      'unknown key [deployment] replicas (ignored)',
      'unknown key [scaling] replicas (ignored)',
      'unknown section [runtime.python] (ignored)',
      'unknown section [hardware.extra] (ignored)',
      '[dependencies.npm] is not installed: Runlet installs [dependencies.pip] only. Install these yourself: on this machine for runlet dev, in the app\'s image for a cluster',
      'unknown key [dependencies.pip] index_url (ignored)',
      'unknown section [frobnicate] (ignored)',
    ]);
    expect(parsed.spec.scaling.minReplicas).toBe(1);
  });

  it('warns that module means nothing to a custom runtime', () => {
    const parsed = parseServiceToml('[deployment]\nmodule = "app"\n[runtime.custom]\nport = 80', { defaultName: 'x' });
    expect(parsed.warnings).toEqual(['[deployment] module applies to the Python runtime only (ignored with [runtime.custom])']);
    expect(parsed.spec.runtime.python).toBeUndefined();
  });
});

describe('App → service.toml', () => {
  it('writes every field service.toml has', () => {
    const text = appToServiceToml(serviceTomlToApp(FULL_PYTHON, options));
    expect(text).toBe(
      [
        '[deployment]',
        'name = "py"',
        'module = "pkg.app"',
        'auth = true',
        '',
        '[scaling]',
        'min_replicas = 0',
        'max_replicas = 1',
        'replica_concurrency = 4',
        'response_grace_period = 900',
        'cooldown = 60',
        'scaling_metric = "concurrency_utilization"',
        'cold_start_timeout = 60',
        '',
        '[runs]',
        'keep_finished = 200',
        'retention = 86400',
        'keep_results = false',
        'result_keep_bytes = 1048576',
        'result_ttl = 3600',
        '',
        '[dependencies.pip]',
        'packages = [ "numpy==2.1.0" ]',
        '',
      ].join('\n'),
    );
  });

  it('writes a shell-form entrypoint back as a string', () => {
    const app = serviceTomlToApp('[runtime.custom]\nimage = "i"\nport = 80\nentrypoint = "node s.js"', options);
    expect(appToServiceToml(app)).toContain('entrypoint = "node s.js"');
  });

  it('lists in comments what service.toml cannot hold', () => {
    const app = customApp();
    expect(appToServiceToml(app).split('\n').slice(0, 3)).toEqual([
      '# Not expressible in service.toml, kept on the App "web" only:',
      '#   spec.env[1]: TOKEN from Secret "web-secrets" key "token"',
      '',
    ]);
    const python = pythonApp();
    python.spec.runtime.python = { image: 'ghcr.io/acme/py:3.12', module: 'main', code: { baked: true } };
    expect(appToServiceToml(python)).toContain(
      '#   spec.runtime.python.image = "ghcr.io/acme/py:3.12"\n#   spec.runtime.python.code = {"baked":true}\n',
    );
  });
});

describe('round trip', () => {
  it.each([
    ['custom', FULL_CUSTOM],
    ['python', FULL_PYTHON],
    ['empty', ''],
    ['shell entrypoint', '[runtime.custom]\nimage = "i"\nport = 80\nentrypoint = "node s.js"'],
  ])('%s: toml → App → toml → App is the same App', (_, toml) => {
    const first = serviceTomlToApp(toml, options);
    const second = serviceTomlToApp(appToServiceToml(first), options);
    expect(second).toEqual(first);
    expect(validateApp(first)).toEqual([]);
  });

  it('App → toml → App keeps everything but what the comments list', () => {
    const app: App = customApp();
    const back = serviceTomlToApp(appToServiceToml(app), { defaultName: 'ignored', namespace: 'team-a' });
    const { status: _status, ...withoutStatus } = app;
    expect(back).toEqual({ ...withoutStatus, spec: { ...app.spec, env: [{ name: 'GREETING', value: 'hi' }] } });
  });
});

describe('loadAppDir', () => {
  const root = mkdtemp(join(tmpdir(), 'runlet-crds-'));
  afterAll(async () => rm(await root, { recursive: true, force: true }));

  it('reads <dir>/service.toml', async () => {
    const dir = join(await root, 'folder-name');
    await mkdir(dir);
    await writeFile(join(dir, 'service.toml'), '[deployment]\nname = "hello"\n[scaling]\nreplicas = 2\n');
    const loaded = await loadAppDir(dir);
    expect(loaded).toMatchObject({ name: 'hello', dir, warnings: ['unknown key [scaling] replicas (ignored)'] });
    expect(loaded.spec.scaling.replicaConcurrency).toBe(4);
  });

  it('falls back to every default and the folder name without service.toml', async () => {
    const dir = join(await root, 'bare-app');
    await mkdir(dir);
    const loaded = await loadAppDir(dir);
    expect(loaded.name).toBe('bare-app');
    expect(loaded.spec.runtime.python?.module).toBe('main');
  });

  it('names the file in errors', async () => {
    const dir = join(await root, 'broken');
    await mkdir(dir);
    await writeFile(join(dir, 'service.toml'), '[scaling]\nresponse_grace_period = 0\n');
    await expect(loadAppDir(dir)).rejects.toThrow(
      `${join(dir, 'service.toml')}: [scaling] response_grace_period must be an integer from 1 to 43200 seconds, got 0`,
    );
  });

  it('rejects a folder that does not exist', async () => {
    await expect(loadAppDir(join(await root, 'nope'))).rejects.toThrow(/app folder .*nope does not exist/);
  });
});
