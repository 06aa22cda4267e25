import type { V1Container } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { PYTHON_IMAGE, pythonSpec, renderConfig, storedApp } from '../../test/support/operator-apps.ts';
import { APP_HEALTH_ROUTE } from '../../sidecar/admin-interface.ts';
import { renderAppContainer } from './app-container.ts';

const render = (spec: Record<string, unknown>): V1Container => renderAppContainer(storedApp(spec), renderConfig());
const custom = (fields: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  runtime: { custom: { image: 'ghcr.io/acme/web:1', port: 8080, ...fields } },
  ...extra,
});

const TMP_MOUNT = { name: 'app-tmp', mountPath: '/tmp' };
const NO_BYTECODE = { name: 'PYTHONDONTWRITEBYTECODE', value: '1' };

describe('renderAppContainer', () => {
  it.each<[string, Record<string, unknown>, Partial<V1Container>]>([
    [
      'python, code from a ConfigMap: the default runtime image, code mounted at /app',
      { runtime: { python: { module: 'pkg.app', code: { configMap: { name: 'hello-code' } } } }, scaling: { replicaConcurrency: 6 } },
      {
        image: PYTHON_IMAGE,
        command: ['python', '-m', 'runlet_runtime', '--app-dir', '/app', '--module', 'pkg.app', '--port', '8192', '--concurrency', '6'],
        workingDir: '/app',
        volumeMounts: [{ name: 'code', mountPath: '/app', readOnly: true }, TMP_MOUNT],
      },
    ],
    [
      'python, baked code in its own image: no code volume',
      { runtime: { python: { image: 'ghcr.io/acme/model:3', code: { baked: true } } } },
      {
        image: 'ghcr.io/acme/model:3',
        command: ['python', '-m', 'runlet_runtime', '--app-dir', '/app', '--module', 'main', '--port', '8192', '--concurrency', '4'],
        workingDir: '/app',
        volumeMounts: [TMP_MOUNT],
      },
    ],
    [
      "custom with entrypoint, port and health paths: told to listen on the loopback, liveness asked of the sidecar's admin port, readiness left to the sidecar's",
      custom({ entrypoint: ['node', 'server.js', '--quiet'], healthcheckEndpoint: '/health', readycheckEndpoint: '/ready' }),
      {
        image: 'ghcr.io/acme/web:1',
        command: ['node', 'server.js', '--quiet'],
        env: [{ name: 'PORT', value: '8080' }, { name: 'HOST', value: '127.0.0.1' }],
        ports: undefined,
        startupProbe: { httpGet: { path: '/app-healthz', port: 8001 }, periodSeconds: 1, failureThreshold: 300, timeoutSeconds: 5 },
        livenessProbe: { httpGet: { path: '/app-healthz', port: 8001 }, periodSeconds: 10, failureThreshold: 6, timeoutSeconds: 5 },
        readinessProbe: undefined,
      },
    ],
    [
      "custom without entrypoint: the image's own, no probes",
      custom({}),
      { command: undefined, startupProbe: undefined, livenessProbe: undefined, readinessProbe: undefined, workingDir: undefined },
    ],
    [
      'custom with a readiness path only: no probe on the app container (the sidecar waits for it)',
      custom({ readycheckEndpoint: '/ready' }),
      { startupProbe: undefined, livenessProbe: undefined, readinessProbe: undefined, ports: undefined },
    ],
    [
      'env values and secret references, in order',
      pythonSpec({
        env: [
          { name: 'GREETING', value: 'hi' },
          { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'token' } } },
        ],
      }),
      {
        env: [
          NO_BYTECODE,
          { name: 'GREETING', value: 'hi' },
          { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'token' } } },
        ],
      },
    ],
    [
      "custom: the platform's PORT and HOST win over the App's",
      custom({}, { env: [{ name: 'PORT', value: '1' }, { name: 'HOST', value: '0.0.0.0' }, { name: 'MODE', value: 'prod' }] }),
      { env: [{ name: 'PORT', value: '8080' }, { name: 'HOST', value: '127.0.0.1' }, { name: 'MODE', value: 'prod' }] },
    ],
    [
      'CPU and memory as request and limit, GPUs as limit',
      pythonSpec({ resources: { cpu: '2', memory: '8Gi', gpu: 1 } }),
      { resources: { requests: { cpu: '2', memory: '8Gi' }, limits: { cpu: '2', memory: '8Gi', 'nvidia.com/gpu': '1' } } },
    ],
    ['GPUs only', pythonSpec({ resources: { gpu: 2 } }), { resources: { limits: { 'nvidia.com/gpu': '2' } } }],
    ['zero GPUs and nothing else: no resources', pythonSpec({ resources: { gpu: 0 } }), { resources: undefined }],
    ['no resources', pythonSpec(), { resources: undefined, env: [NO_BYTECODE] }],
    ["python: no bytecode written, whatever the App's env says", pythonSpec({ env: [{ name: 'PYTHONDONTWRITEBYTECODE', value: '' }] }), { env: [NO_BYTECODE] }],
  ])('%s', (_case, spec, expected) => {
    const container = render(spec);
    for (const [field, value] of Object.entries(expected)) expect(container[field as keyof V1Container], field).toEqual(value);
  });

  it.each([
    ['python', pythonSpec(), 8192],
    ['custom', custom({ healthcheckEndpoint: '/health', readycheckEndpoint: '/ready' }), 8080],
    ['custom, no health paths', custom({}), 8080],
  ])('%s: no probe and no port of the app container is on its own server: the kubelet probes the pod IP, which every pod reaches', (_case, spec, appPort) => {
    const container = render(spec);
    const probed = [container.startupProbe, container.livenessProbe, container.readinessProbe].flatMap((probe) => (probe === undefined ? [] : [probe.httpGet?.port ?? probe.tcpSocket?.port]));
    expect(probed.every((port) => port === 8001), `probed ports ${probed.join(', ')}`).toBe(true);
    expect(container.ports).toBeUndefined();
    expect(JSON.stringify(container)).not.toContain(`"port":${appPort}`);
  });

  it("custom: the app's liveness is asked at the route the sidecar serves it on", () => {
    const container = render(custom({ healthcheckEndpoint: '/health' }));
    expect([container.startupProbe?.httpGet?.path, container.livenessProbe?.httpGet?.path]).toEqual([APP_HEALTH_ROUTE, APP_HEALTH_ROUTE]);
  });

  it.each([
    ['python', pythonSpec()],
    ['custom', custom({})],
  ])('%s: named app, stopped only after the sidecar drained (preStop GET /drain on 8001, which holds no secret)', (_case, spec) => {
    const container = render(spec);
    expect(container.name).toBe('app');
    expect(container.lifecycle).toEqual({ preStop: { httpGet: { path: '/drain', port: 8001 } } });
  });

  it.each([
    ['python: the runtime image’s user', pythonSpec(), 10001],
    ['custom: a fixed non-root user, the image’s being unknown', custom({}), 65532],
  ])('%s, no privileges, a read-only root and /tmp to write in', (_case, spec, uid) => {
    const container = render(spec);
    expect(container.securityContext).toEqual({
      runAsUser: uid,
      runAsGroup: uid,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
    });
    expect(container.volumeMounts).toContainEqual(TMP_MOUNT);
  });
});
