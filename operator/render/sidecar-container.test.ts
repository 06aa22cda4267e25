import { describe, expect, it } from 'vitest';
import { renderConfig, pythonSpec, SIDECAR_IMAGE, storedApp } from '../../test/support/operator-apps.ts';
import { IMAGE_JEMALLOC_PATH, renderSidecarContainer, SIDECAR_MALLOC_CONF, SIDECAR_NODE_OPTIONS } from './sidecar-container.ts';

const customSpec = (extra: Record<string, unknown> = {}) => ({ runtime: { custom: { image: 'web:1', port: 3000, ...extra } } });

describe('renderSidecarContainer', () => {
  it('runs `runlet sidecar` with the flags of a Python app', () => {
    const app = storedApp(pythonSpec({ scaling: { replicaConcurrency: 8, responseGracePeriod: 120 } }), { name: 'hello', namespace: 'team-a' });
    const container = renderSidecarContainer(app, renderConfig());
    expect(container.image).toBe(SIDECAR_IMAGE);
    expect(container.command).toEqual(['runlet']);
    expect(container.args).toEqual([
      'sidecar',
      '--project', 'team-a',
      '--app', 'hello',
      '--runtime', 'python',
      '--app-port', '8192',
      '--port', '8000',
      '--admin-port', '8001',
      '--concurrency', '8',
      '--response-grace-period', '120',
      '--auth', 'on',
      '--run-store', 'runlog',
      '--data-dir', '/var/run/runlet',
      '--admin-key-dir', '/var/run/secrets/runlet/admin-key',
    ]);
  });

  it('keeps results only with a results store, with the App\'s bound and ttl: a RunLog never holds them', () => {
    const keeps = storedApp(pythonSpec({ runs: { keepFinished: 200, retention: 86400, keepResults: true, resultKeepBytes: 4096, resultTtl: 600 } }));
    const withStore = renderSidecarContainer(keeps, renderConfig({ resultsCollectorUrl: 'http://runlet-operator.runlet-system:8080' })).args!;
    expect(withStore.join(' ')).toContain('--run-store results --data-dir /var/run/runlet --admin-key-dir /var/run/secrets/runlet/admin-key --keep-results on --result-keep-bytes 4096 --result-ttl 600');
    const withRunLog = renderSidecarContainer(keeps, renderConfig()).args!;
    expect(withRunLog).not.toContain('--keep-results');
    const off = renderSidecarContainer(storedApp(pythonSpec()), renderConfig({ resultsCollectorUrl: 'http://runlet-operator.runlet-system:8080' })).args!;
    expect(off).not.toContain('--keep-results');
  });

  it('turns caller auth off only when the App says so', () => {
    const open = renderSidecarContainer(storedApp(pythonSpec({ auth: { enabled: false } })), renderConfig()).args!;
    expect(open[open.indexOf('--auth') + 1]).toBe('off');
  });

  it.each([
    ['custom port, no health paths', customSpec(), ['--runtime', 'custom', '--app-port', '3000'], undefined, undefined],
    ['readiness path preferred', customSpec({ healthcheckEndpoint: '/live', readycheckEndpoint: '/ready' }), ['--runtime', 'custom'], '/ready', '/live'],
    ['health path when there is no readiness path', customSpec({ healthcheckEndpoint: '/live' }), ['--runtime', 'custom'], '/live', '/live'],
    ['readiness path only: no health path to ask', customSpec({ readycheckEndpoint: '/ready' }), ['--runtime', 'custom'], '/ready', undefined],
  ])('custom runtime: %s', (_case, spec, expectedArgs, readyPath, healthPath) => {
    const args = renderSidecarContainer(storedApp(spec), renderConfig()).args!;
    expect(args.join(' ')).toContain(expectedArgs.join(' '));
    const flag = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
    expect(flag('--ready-path')).toBe(readyPath);
    // The sidecar asks it on the loopback for the app container's liveness probe (GET :8001/app-healthz).
    expect(flag('--health-path')).toBe(healthPath);
  });

  it.each([
    ['native sidecar: restartPolicy Always, and the startup probe on /healthz', true],
    ['plain container: no restartPolicy, the same startup probe', false],
  ])('%s', (_case, nativeSidecars) => {
    const container = renderSidecarContainer(storedApp(pythonSpec()), renderConfig({ nativeSidecars }));
    expect(container.restartPolicy).toBe(nativeSidecars ? 'Always' : undefined);
    // Both ways: liveness waits for it, so a slow start on a busy node is not a crash loop.
    expect(container.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 8001 });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/ready', port: 8001 });
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 8001 });
  });

  it.each([
    ['no allow-list: no variable', [], undefined],
    ['allow-list joined by commas', ['10.0.0.0/8', '192.168.1.0/24'], '10.0.0.0/8,192.168.1.0/24'],
  ])('webhook CIDRs: %s', (_case, webhookAllowCidrs, value) => {
    const env = renderSidecarContainer(storedApp(pythonSpec()), renderConfig({ webhookAllowCidrs })).env!;
    expect(env.slice(0, 3)).toEqual([
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'NODE_OPTIONS', value: SIDECAR_NODE_OPTIONS },
    ]);
    expect(env.find((variable) => variable.name === 'RUNLET_WEBHOOK_ALLOW_CIDRS')?.value).toBe(value);
  });

  it('starts Node with the flags and the allocator the memory measurements chose: semi-spaces, gc exposed, jemalloc', () => {
    const env = renderSidecarContainer(storedApp(pythonSpec()), renderConfig()).env!;
    const value = (name: string) => env.find((variable) => variable.name === name)?.value;
    expect(value('NODE_OPTIONS')?.split(' ')).toEqual(['--max-semi-space-size=4', '--expose-gc']);
    expect(value('LD_PRELOAD')).toBe(IMAGE_JEMALLOC_PATH);
    expect(value('MALLOC_CONF')).toBe(SIDECAR_MALLOC_CONF);
  });

  it('takes the holder key from the namespace’s copy, optionally: without a holder the pod starts all the same', () => {
    const env = renderSidecarContainer(storedApp(pythonSpec()), renderConfig()).env!;
    expect(env.find((variable) => variable.name === 'RUNLET_HOLDER_KEY')).toEqual({
      name: 'RUNLET_HOLDER_KEY',
      valueFrom: { secretKeyRef: { name: 'runlet-holder-key', key: 'key', optional: true } },
    });
  });

  it('gives the sidecar no secret in its env: the admin key, which signs cancels, is the mounted Secret runlet-admin-key', () => {
    const container = renderSidecarContainer(storedApp(pythonSpec()), renderConfig());
    expect(container.env!.filter((variable) => variable.value !== undefined && /TOKEN|KEY|SECRET/i.test(variable.name))).toEqual([]);
    expect(container.volumeMounts).toContainEqual({ name: 'admin-key', mountPath: '/var/run/secrets/runlet/admin-key', readOnly: true });
  });

  it('runs as the Runlet image’s user (1000), without privileges, on a read-only root', () => {
    expect(renderSidecarContainer(storedApp(pythonSpec()), renderConfig()).securityContext).toEqual({
      runAsUser: 1000,
      runAsGroup: 1000,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
    });
  });

  it('mounts /tmp, the run-record directory, the RunLog token and the admin key, with modest resources', () => {
    const container = renderSidecarContainer(storedApp(pythonSpec()), renderConfig());
    expect(container.volumeMounts).toEqual([
      { name: 'sidecar-tmp', mountPath: '/tmp' },
      { name: 'runlet-data', mountPath: '/var/run/runlet' },
      { name: 'sidecar-token', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
      { name: 'admin-key', mountPath: '/var/run/secrets/runlet/admin-key', readOnly: true },
    ]);
    expect(container.resources).toEqual({ requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } });
    expect(container.ports?.map((port) => [port.name, port.containerPort])).toEqual([['http', 8000], ['admin', 8001]]);
  });
});
