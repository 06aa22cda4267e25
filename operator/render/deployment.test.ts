import { describe, expect, it } from 'vitest';
import { pythonSpec, renderConfig, storedApp } from '../../test/support/operator-apps.ts';
import { podSecurityViolations } from '../../test/kube/pod-security.ts';
import { renderDeployment } from './deployment.ts';

const customSpec = { runtime: { custom: { image: 'web:1', port: 8080 } } };
/** The volumes of every pod: the sidecar's data directory, each container's /tmp, the sidecar's token. */
const ALWAYS = ['runlet-data', 'sidecar-tmp', 'app-tmp', 'sidecar-token', 'admin-key'];

describe('renderDeployment', () => {
  it('names, labels and owns the Deployment like the App; runs minReplicas', () => {
    const app = storedApp(pythonSpec({ scaling: { minReplicas: 3, maxReplicas: 5 } }), { name: 'hello', namespace: 'team-a', uid: 'u-1' });
    const deployment = renderDeployment(app, renderConfig(), { codeHash: undefined });
    expect(deployment.apiVersion).toBe('apps/v1');
    expect(deployment.kind).toBe('Deployment');
    expect(deployment.metadata?.name).toBe('hello');
    expect(deployment.metadata?.namespace).toBe('team-a');
    expect(deployment.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'App', name: 'hello', uid: 'u-1', controller: true });
    expect(deployment.spec?.replicas).toBe(3);
    expect(deployment.spec?.selector).toEqual({ matchLabels: { 'runlet.dev/app': 'hello' } });
    expect(deployment.spec?.template.metadata?.labels).toMatchObject({ 'runlet.dev/app': 'hello', 'app.kubernetes.io/managed-by': 'runlet' });
    const pod = deployment.spec!.template.spec!;
    expect(pod.serviceAccountName).toBe('runlet-sidecar');
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  });

  it.each([
    ['native sidecar: an init container beside the app container', true, ['sidecar'], ['app']],
    ['no native sidecars: a second plain container', false, undefined, ['app', 'sidecar']],
  ])('%s', (_case, nativeSidecars, initContainers, containers) => {
    const pod = renderDeployment(storedApp(pythonSpec()), renderConfig({ nativeSidecars }), { codeHash: undefined }).spec!.template.spec!;
    expect(pod.initContainers?.map((c) => c.name)).toEqual(initContainers);
    expect(pod.containers.map((c) => c.name)).toEqual(containers);
  });

  it.each([
    [1, 31],
    [900, 930],
    [43200, 43230],
  ])('a %i s response grace period gives %i s to terminate', (responseGracePeriod, seconds) => {
    const pod = renderDeployment(storedApp(pythonSpec({ scaling: { responseGracePeriod } })), renderConfig(), { codeHash: undefined }).spec!.template.spec!;
    expect(pod.terminationGracePeriodSeconds).toBe(seconds);
  });

  it.each([
    ['code ConfigMap: mounted, its hash on the template', pythonSpec(), 'abc123', [...ALWAYS, 'code'], 'abc123'],
    ['code ConfigMap not there yet: no hash', pythonSpec(), undefined, [...ALWAYS, 'code'], undefined],
    ['baked code: no code volume', { runtime: { python: { code: { baked: true } } } }, undefined, ALWAYS, undefined],
    ['custom runtime: no code volume', customSpec, undefined, ALWAYS, undefined],
  ])('%s', (_case, spec, codeHash, volumes, annotation) => {
    const template = renderDeployment(storedApp(spec), renderConfig(), { codeHash }).spec!.template;
    expect(template.spec!.volumes!.map((volume) => volume.name)).toEqual(volumes);
    expect(template.metadata?.annotations?.['runlet.dev/code-hash']).toBe(annotation);
  });

  it.each([
    ['none configured: no imagePullSecrets at all', [], undefined],
    ['the configured pull secrets, in order, for every container', [{ name: 'registry-a' }, { name: 'registry-b' }], [{ name: 'registry-a' }, { name: 'registry-b' }]],
  ])('%s', (_case, imagePullSecrets, rendered) => {
    for (const spec of [pythonSpec(), customSpec]) {
      const pod = renderDeployment(storedApp(spec), renderConfig({ imagePullSecrets }), { codeHash: undefined }).spec!.template.spec!;
      expect(pod.imagePullSecrets).toEqual(rendered);
    }
  });

  it('mounts the code ConfigMap by its name', () => {
    const volumes = renderDeployment(storedApp(pythonSpec({}, 'my-code')), renderConfig(), { codeHash: 'h' }).spec!.template.spec!.volumes!;
    expect(volumes.find((volume) => volume.name === 'code')?.configMap).toEqual({ name: 'my-code' });
  });

  it('projects the service-account token for the sidecar alone', () => {
    const volumes = renderDeployment(storedApp(pythonSpec()), renderConfig(), { codeHash: undefined }).spec!.template.spec!.volumes!;
    const token = volumes.find((volume) => volume.name === 'sidecar-token')!;
    expect(token.projected?.sources?.map((source) => Object.keys(source)[0])).toEqual(['serviceAccountToken', 'configMap', 'downwardAPI']);
  });

  it('with a results store, projects the sidecar a token for the collector alone: its audience, bound to the pod, short-lived', () => {
    const collector = renderConfig({ resultsCollectorUrl: 'http://runlet-collector.runlet-system.svc:8082' });
    const pod = renderDeployment(storedApp(pythonSpec()), collector, { codeHash: undefined }).spec!.template.spec!;
    expect(pod.volumes!.find((volume) => volume.name === 'results-token')?.projected).toEqual({
      sources: [{ serviceAccountToken: { path: 'token', audience: 'runlet-results', expirationSeconds: 600 } }],
    });
    const sidecar = pod.initContainers!.find((container) => container.name === 'sidecar')!;
    expect(sidecar.volumeMounts).toContainEqual({ name: 'results-token', mountPath: '/var/run/secrets/runlet.dev/results', readOnly: true });
    expect(sidecar.env).toContainEqual({ name: 'RUNLET_RESULTS_TOKEN_FILE', value: '/var/run/secrets/runlet.dev/results/token' });
    // Not the app container's: the App's code never holds it.
    const app = pod.containers.find((container) => container.name === 'app')!;
    expect((app.volumeMounts ?? []).map((mount) => mount.name)).not.toContain('results-token');
    // Without a results store, none.
    const runLogs = renderDeployment(storedApp(pythonSpec()), renderConfig(), { codeHash: undefined }).spec!.template.spec!;
    expect(runLogs.volumes!.map((volume) => volume.name)).not.toContain('results-token');
  });

  it.each([
    ['python, native sidecar', pythonSpec(), true],
    ['python, classic sidecar', pythonSpec(), false],
    ['python, baked code', { runtime: { python: { code: { baked: true } } } }, true],
    ['custom, native sidecar', customSpec, true],
    ['custom, classic sidecar', customSpec, false],
  ])('%s: the pod passes the restricted Pod Security Standard, every container on a read-only root', (_case, spec, nativeSidecars) => {
    const template = renderDeployment(storedApp(spec), renderConfig({ nativeSidecars }), { codeHash: 'h' }).spec!.template;
    expect(podSecurityViolations({ metadata: template.metadata, spec: template.spec }, 'restricted')).toEqual([]);
    const containers = [...(template.spec!.initContainers ?? []), ...template.spec!.containers];
    expect(containers.map((container) => [container.name, container.securityContext?.readOnlyRootFilesystem])).toEqual(
      containers.map((container) => [container.name, true]),
    );
  });
});

describe('secrets in the pod template', () => {
  it.each([true, false])('none a reader of the namespace could use (native sidecar: %s): no literal in env, hooks or probes; the admin key only as a Secret volume', (nativeSidecars) => {
    const template = renderDeployment(storedApp(pythonSpec()), renderConfig({ nativeSidecars }), { codeHash: undefined }).spec!.template;
    const text = JSON.stringify(template);
    expect(text).not.toMatch(/RUNLET_DRAIN_TOKEN|\/drain\//);
    const containers = [...(template.spec!.initContainers ?? []), ...template.spec!.containers];
    for (const container of containers) expect([container.name, container.lifecycle?.preStop?.httpGet?.path ?? null]).toEqual([container.name, container.name === 'app' ? '/drain' : null]);
    expect(template.spec!.volumes).toContainEqual({ name: 'admin-key', secret: { secretName: 'runlet-admin-key', optional: true, defaultMode: 0o444 } });
  });

  it.each([true, false])('the admin key is readable by the sidecar’s user, and mounted in the sidecar alone (native sidecar: %s)', (nativeSidecars) => {
    const { spec } = renderDeployment(storedApp(pythonSpec()), renderConfig({ nativeSidecars }), { codeHash: undefined }).spec!.template;
    const containers = [...(spec!.initContainers ?? []), ...spec!.containers];
    const volume = spec!.volumes!.find((candidate) => candidate.secret?.secretName === 'runlet-admin-key')!;
    const mountedBy = containers.filter((container) => container.volumeMounts?.some((mount) => mount.name === volume.name));
    expect(mountedBy.map((container) => container.name)).toEqual(['sidecar']);
    // The kubelet writes a Secret volume's files as root:root with the volume's mode, the group fsGroup when the
    // pod sets one (then group-readable): whoever else reads them, reads them by the mode's last digit.
    const user = mountedBy[0]!.securityContext!;
    expect(user.runAsUser).not.toBe(0);
    const fsGroup = spec!.securityContext?.fsGroup;
    const mode = volume.secret!.defaultMode!;
    const readable = (mode & 0o004) !== 0 || (fsGroup !== undefined && (fsGroup === user.runAsGroup || user.runAsGroup === undefined) && (mode & 0o040) !== 0);
    expect({ mode: mode.toString(8), fsGroup, readable }).toMatchObject({ readable: true });
  });
});
