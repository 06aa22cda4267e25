// The chart rendered with its default values and with ci/production-values.yaml: every object valid for
// Kubernetes, and the properties the chart promises (security, high availability, probes, configuration).
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1ConfigMap, V1Container, V1Deployment, V1Ingress, V1Namespace, V1NetworkPolicy, V1PodDisruptionBudget, V1Role, V1RoleBinding, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readConfigFile, resolveConfig, type OperatorConfig } from '../../operator/config.ts';
import { ACTIVATOR_USAGE, runActivatorCommand } from '../../cli/activator-command.ts';
import { kubernetesProblems } from './kube-validate.ts';
import { renderChart } from '../../charts/render/render.ts';
import { CHART_DIR, RELEASE, VALUE_SETS, objectOf, renderWith } from './rendered.ts';

const NAME = 'runlet-operator';
const ACTIVATOR = 'runlet-activator';
/** Where the chart keeps the held async calls by default: a namespace of their own beside the release's. */
const HELD_CALLS = `${RELEASE.namespace}-held`;
const CONFIG_PATH = '/etc/runlet/operator.yaml';

/** The operator's configuration as it would start with it: the file read by the operator's own reader. */
async function operatorConfigOf(configMap: V1ConfigMap): Promise<OperatorConfig> {
  const dir = await mkdtemp(join(tmpdir(), 'runlet-chart-'));
  try {
    const file = join(dir, 'operator.yaml');
    await writeFile(file, configMap.data!['operator.yaml']!);
    return resolveConfig(await readConfigFile(file), { leaderElection: { identity: 'runlet-operator-7d9f-abcde' } });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const operatorContainer = (deployment: V1Deployment): V1Container => deployment.spec!.template.spec!.containers.find((c) => c.name === 'operator')!;

describe.each(Object.entries(VALUE_SETS))('the chart with %s values', (label, valuesFiles) => {
  const chart = renderWith(valuesFiles);
  const deployment = objectOf<V1Deployment>(chart, 'Deployment', NAME);
  const container = operatorContainer(deployment);
  const configMap = objectOf<V1ConfigMap>(chart, 'ConfigMap', `${NAME}-config`);

  it('renders valid Kubernetes objects, CRDs included, without unknown fields', () => {
    const objects = [...chart.manifests.map((m) => ({ source: m.source, object: m.object })), ...chart.crds.map((c) => ({ source: c.source, object: parseYaml(c.text, { version: '1.1' }) }))];
    const problems = objects.flatMap(({ source, object }) => kubernetesProblems(object).map((problem) => `${source} ${object.kind}/${object.metadata.name}: ${problem}`));
    expect(problems).toEqual([]);
  });

  it('renders the operator, the activator, their RBAC, the API Service, the runs viewer, the App editor, the sidecar ClusterRole, the embedded PostgreSQL, namespaced in the release namespace, and the held calls’ namespace with their Roles', () => {
    const names = chart.manifests.map((m) => `${m.object.kind}/${m.object.metadata.name}`).sort();
    const ingress = label === 'production' ? ['Ingress/runlet-operator'] : [];
    expect(names).toEqual(
      [
        'ClusterRole/runlet-activator',
        'ClusterRole/runlet-activator-tenant',
        'ClusterRole/runlet-api-key',
        'ClusterRole/runlet-api-keys-admin',
        'ClusterRole/runlet-app-editor',
        'ClusterRole/runlet-operator',
        'ClusterRole/runlet-operator-tenant',
        'ClusterRole/runlet-runs-operator',
        'ClusterRole/runlet-runs-viewer',
        'ClusterRole/runlet-sidecar',
        'ClusterRoleBinding/runlet-activator',
        'ClusterRoleBinding/runlet-operator',
        'ConfigMap/runlet-operator-config',
        'StatefulSet/runlet-postgres',
        'Service/runlet-postgres',
        'NetworkPolicy/runlet-postgres',
        'NetworkPolicy/runlet-operator',
        'Service/runlet-collector',
        'Role/runlet-operator-results',
        'RoleBinding/runlet-operator-results',
        'Deployment/runlet-activator',
        'Deployment/runlet-operator',
        ...ingress,
        'PodDisruptionBudget/runlet-activator',
        'PodDisruptionBudget/runlet-operator',
        'Role/runlet-activator',
        'Role/runlet-operator-holder',
        'Role/runlet-operator-leader-election',
        'RoleBinding/runlet-activator',
        'RoleBinding/runlet-operator-holder',
        'RoleBinding/runlet-operator-leader-election',
        'Service/runlet-holder',
        'Service/runlet-operator',
        'ServiceAccount/runlet-activator',
        'ServiceAccount/runlet-operator',
        `Namespace/${HELD_CALLS}`,
        'Role/runlet-activator-held-calls',
        'RoleBinding/runlet-activator-held-calls',
        'Role/runlet-operator-held-calls',
        'RoleBinding/runlet-operator-held-calls',
      ].sort(),
    );
    const clusterScoped = new Set(['ClusterRole', 'ClusterRoleBinding', 'Namespace']);
    const inHeldCalls = new Set(['Role/runlet-activator-held-calls', 'RoleBinding/runlet-activator-held-calls', 'Role/runlet-operator-held-calls', 'RoleBinding/runlet-operator-held-calls']);
    for (const { object } of chart.manifests) {
      const name = `${object.kind}/${object.metadata.name}`;
      expect(object.metadata.namespace, name).toBe(clusterScoped.has(object.kind) ? undefined : inHeldCalls.has(name) ? HELD_CALLS : RELEASE.namespace);
    }
    expect(chart.crds.map((crd) => crd.source)).toEqual(['crds/apps.runlet.dev.yaml', 'crds/runlogs.runlet.dev.yaml']);
  });

  it("admits only the operator's pods to the embedded PostgreSQL", () => {
    const policy = objectOf<V1NetworkPolicy>(chart, 'NetworkPolicy', 'runlet-postgres');
    const postgres = objectOf<V1StatefulSet>(chart, 'StatefulSet', 'runlet-postgres');
    expect(policy.spec!.podSelector!.matchLabels).toEqual(postgres.spec!.selector.matchLabels);
    expect(policy.spec!.policyTypes).toEqual(['Ingress']);
    expect(policy.spec!.ingress).toEqual([{ from: [{ podSelector: { matchLabels: deployment.spec!.selector.matchLabels } }], ports: [{ port: 5432, protocol: 'TCP' }] }]);
  });

  it('runs two replicas as a non-root user with a read-only root filesystem', () => {
    expect(deployment.spec!.replicas).toBe(2);
    const pod = deployment.spec!.template.spec!;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(pod.serviceAccountName).toBe(NAME);
    expect(container.resources?.requests).toEqual(expect.objectContaining({ cpu: expect.any(String), memory: expect.any(String) }));
    expect(container.resources?.limits?.memory).toEqual(expect.any(String));
    // A standby is up while the new replica starts, and they spread over nodes.
    expect(deployment.spec!.strategy?.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    expect(pod.topologySpreadConstraints?.[0]).toMatchObject({ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: deployment.spec!.selector.matchLabels } });
  });

  it('probes start-up, readiness and liveness on the health port the configuration serves', async () => {
    const config = await operatorConfigOf(configMap);
    // The operator holds no call (holder.inOperator false): the activator pods have the holder port.
    // With a results store, the collector has a port of its own, apart from the management API's.
    // Metrics, too, have a port of their own: the NetworkPolicy of the operator's pods keeps tenants out of it.
    expect(container.ports).toEqual([
      { name: 'http', containerPort: config.server.port, protocol: 'TCP' },
      { name: 'metrics', containerPort: config.server.metricsPort, protocol: 'TCP' },
      { name: 'collector', containerPort: config.results.collectorPort, protocol: 'TCP' },
    ]);
    expect(new Set([config.server.port, config.server.metricsPort, config.results.collectorPort]).size).toBe(3);
    expect(config.server.host).toBe('0.0.0.0');
    expect(container.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/ready', port: 'http' });
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    // Start-up may take a minute (30 × 2 s) before liveness takes over.
    expect(container.startupProbe!.periodSeconds! * container.startupProbe!.failureThreshold!).toBeGreaterThanOrEqual(60);
  });

  it('gives the pods their name and namespace, the run history retention, and the configuration file from the ConfigMap', () => {
    expect(container.args).toEqual(['operator', '--config', CONFIG_PATH]);
    // The embedded PostgreSQL (results-postgres.test.ts): its Secret, made by the operator; its Service; the collector.
    expect(container.env).toEqual([
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'RUNLET_RESULTS_POSTGRES_SECRET', value: 'runlet-postgres' },
      { name: 'RUNLET_RESULTS_POSTGRES_HOST', value: 'runlet-postgres.runlet-system.svc' },
      { name: 'RUNLET_RESULTS_COLLECTOR_URL', value: 'http://runlet-collector.runlet-system.svc:8082' },
      { name: 'RUNLET_RESULTS_RETENTION_DAYS', value: '30' },
    ]);
    const mount = container.volumeMounts!.find((m) => CONFIG_PATH.startsWith(`${m.mountPath}/`))!;
    expect(mount.readOnly).toBe(true);
    const volume = deployment.spec!.template.spec!.volumes!.find((v) => v.name === mount.name)!;
    expect(volume.configMap?.name).toBe(configMap.metadata!.name);
    expect(Object.keys(configMap.data!)).toEqual([CONFIG_PATH.slice(mount.mountPath!.length + 1)]);
  });

  it('rolls the pods when the configuration changes: its checksum is on the pod template', () => {
    const checksum = createHash('sha256').update(configMap.data!['operator.yaml']!.replace(/\n$/, '')).digest('hex');
    expect(deployment.spec!.template.metadata!.annotations!['checksum/config']).toBe(checksum);
  });

  it('limits voluntary disruptions to one replica of the operator pods', () => {
    const pdb = objectOf<V1PodDisruptionBudget>(chart, 'PodDisruptionBudget', NAME);
    expect(pdb.spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: deployment.spec!.selector.matchLabels } });
  });

  it('selects the operator pods, and only them, in the Deployment, the Service and the PDB', () => {
    const selector = deployment.spec!.selector.matchLabels!;
    expect(deployment.spec!.template.metadata!.labels).toMatchObject(selector);
    expect(selector['app.kubernetes.io/component']).toBe('operator');
    const service = objectOf<V1Service>(chart, 'Service', NAME);
    expect(service.spec!.selector).toEqual(selector);
    expect(service.spec!.ports).toEqual([{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]);
  });

  it('holds calls at zero in the activator Deployment, listed by the headless Service, the operator pointing Apps there, as their configurations say', async () => {
    const config = await operatorConfigOf(configMap);
    expect(config.holder).toMatchObject({ enabled: true, inOperator: false, serviceNamespace: RELEASE.namespace, serviceName: 'runlet-holder', keySecretName: 'runlet-holder-control' });
    const activator = objectOf<V1Deployment>(chart, 'Deployment', ACTIVATOR);
    const service = objectOf<V1Service>(chart, 'Service', config.holder.serviceName);
    expect(service.metadata!.namespace).toBe(config.holder.serviceNamespace);
    expect(service.spec).toEqual({
      clusterIP: 'None',
      selector: activator.spec!.selector.matchLabels,
      ports: [{ name: 'holder', port: 8090, targetPort: 'holder', protocol: 'TCP' }],
    });
    expect(activator.spec!.selector.matchLabels!['app.kubernetes.io/component']).toBe('activator');
    expect(activator.spec!.template.metadata!.labels).toMatchObject(activator.spec!.selector.matchLabels!);
    // The operator reads the key (to copy it) and makes it; the activator only reads it. In the release namespace
    // neither reads another Secret.
    const secretRules = (name: string) => objectOf<V1Role>(chart, 'Role', name).rules!.filter((rule) => rule.resources?.includes('secrets'));
    const readKey = { apiGroups: [''], resources: ['secrets'], resourceNames: [config.holder.keySecretName], verbs: ['get'] };
    // And it retires the root hand-over key an earlier version kept there (autoscaling/holder-key.ts).
    const rootKey = { apiGroups: [''], resources: ['secrets'], resourceNames: [`${config.holder.serviceName}-key`], verbs: ['get', 'delete'] };
    expect(secretRules(`${NAME}-holder`)).toEqual([readKey, { apiGroups: [''], resources: ['secrets'], verbs: ['create'] }, rootKey]);
    expect(secretRules(ACTIVATOR)).toEqual([readKey]);
    // The held calls, in a namespace of their own that the chart makes: the activator's to keep, the operator's to cancel.
    expect(config.holder.heldCallsNamespace).toBe(HELD_CALLS);
    expect(objectOf<V1Namespace>(chart, 'Namespace', HELD_CALLS).metadata!.labels).toMatchObject({ 'app.kubernetes.io/instance': RELEASE.name, 'pod-security.kubernetes.io/enforce': 'restricted' });
    expect(secretRules(`${ACTIVATOR}-held-calls`)).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['list', 'create', 'update', 'delete'] }]);
    expect(secretRules(`${NAME}-held-calls`)).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'delete'] }]);
    for (const [binding, serviceAccount] of [[`${ACTIVATOR}-held-calls`, ACTIVATOR], [`${NAME}-held-calls`, NAME]] as const) {
      expect(objectOf<V1RoleBinding>(chart, 'RoleBinding', binding).subjects).toEqual([{ kind: 'ServiceAccount', name: serviceAccount, namespace: RELEASE.namespace }]);
    }
  });

  it('bounds each namespace in the results store by results.quotas, with a namespace of its own, in the operator configuration', async () => {
    const config = await operatorConfigOf(configMap);
    expect(config.results).toMatchObject({ maxRunsPerNamespace: 2_000_000, maxRecordMiBPerNamespace: 2048, maxKeptResultMiBPerNamespace: 1024, namespaceQuotas: {} });
    const own = renderWith([], { results: { quotas: { maxRuns: 5_000_000, maxKeptResultMiB: 0, namespaces: { 'team-a': { maxRuns: 10_000_000, maxRecordMiB: 100 } } } } });
    expect((await operatorConfigOf(objectOf<V1ConfigMap>(own, 'ConfigMap', `${NAME}-config`))).results).toMatchObject({
      maxRunsPerNamespace: 5_000_000,
      maxKeptResultMiBPerNamespace: 0,
      namespaceQuotas: { 'team-a': { maxRuns: 10_000_000, maxRecordMiB: 100 } },
    });
  });

  it('keeps the held calls in holder.heldCalls.namespace when given, and makes no Namespace with holder.heldCalls.createNamespace false', async () => {
    const own = renderWith([], { holder: { heldCalls: { namespace: 'runlet-parked-calls' } } });
    expect((await operatorConfigOf(objectOf<V1ConfigMap>(own, 'ConfigMap', `${NAME}-config`))).holder.heldCallsNamespace).toBe('runlet-parked-calls');
    expect(objectOf<V1Deployment>(own, 'Deployment', ACTIVATOR).spec!.template.spec!.containers[0]!.args).toEqual(expect.arrayContaining(['--held-namespace', 'runlet-parked-calls']));
    expect(objectOf<V1Role>(own, 'Role', `${ACTIVATOR}-held-calls`).metadata!.namespace).toBe('runlet-parked-calls');
    objectOf<V1Namespace>(own, 'Namespace', 'runlet-parked-calls');
    const existing = renderWith([], { holder: { heldCalls: { namespace: 'runlet-parked-calls', createNamespace: false } } });
    expect(existing.manifests.filter((manifest) => manifest.object.kind === 'Namespace')).toEqual([]);
    expect(objectOf<V1Role>(existing, 'Role', `${NAME}-held-calls`).metadata!.namespace).toBe('runlet-parked-calls');
    // The release namespace itself: the operator refuses to start, naming the setting (the activator's Role there
    // would list every Secret of the release).
    const same = renderWith([], { holder: { heldCalls: { namespace: RELEASE.namespace, createNamespace: false } } });
    await expect(operatorConfigOf(objectOf<V1ConfigMap>(same, 'ConfigMap', `${NAME}-config`))).rejects.toThrow(/holder\.heldCallsNamespace must be a namespace of its own/);
    // A release namespace of 63 characters: its default held namespace is still a DNS label, and another namespace.
    const long = renderWith([], undefined, { name: 'runlet', namespace: 'n'.repeat(63) });
    expect(objectOf<V1Role>(long, 'Role', `${ACTIVATOR}-held-calls`).metadata!.namespace).toBe(`${'n'.repeat(58)}-held`);
  });

  it('runs two activators as their own ServiceAccount, non-root with a read-only root filesystem, with the flags runlet activator takes', () => {
    const activator = objectOf<V1Deployment>(chart, 'Deployment', ACTIVATOR);
    expect(activator.spec!.replicas).toBe(2);
    expect(activator.spec!.strategy?.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    const pod = activator.spec!.template.spec!;
    expect(pod.serviceAccountName).toBe(ACTIVATOR);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    const [holding] = pod.containers;
    expect(pod.containers).toHaveLength(1);
    expect(holding!.image).toBe(container.image);
    expect(holding!.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(holding!.resources?.requests).toEqual(expect.objectContaining({ cpu: expect.any(String), memory: expect.any(String) }));
    expect(holding!.resources?.limits?.memory).toEqual(expect.any(String));
    expect(holding!.args).toEqual([
      'activator',
      '--port', '8090',
      '--admin-port', '8081',
      '--key-secret', 'runlet-holder-control',
      '--held-namespace', HELD_CALLS,
      '--drain-seconds', '5',
      '--max-calls-per-app', '250',
      '--max-calls', '1000',
      '--max-body-mib', '64',
      '--log-level', label === 'default' ? 'info' : 'debug',
    ]);
    // Every flag is one `runlet activator` documents (it refuses unknown ones).
    for (const flag of holding!.args!.filter((arg) => arg.startsWith('--'))) expect(ACTIVATOR_USAGE, flag).toContain(`  ${flag} `);
    expect(holding!.env?.map((variable) => [variable.name, variable.valueFrom?.fieldRef?.fieldPath])).toEqual([['POD_NAME', 'metadata.name'], ['POD_NAMESPACE', 'metadata.namespace']]);
    expect(holding!.ports).toEqual([
      { name: 'holder', containerPort: 8090, protocol: 'TCP' },
      { name: 'admin', containerPort: 8081, protocol: 'TCP' },
    ]);
    expect(holding!.readinessProbe?.httpGet).toEqual({ path: '/ready', port: 'admin' });
    expect(holding!.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    // Start-up may take a minute before liveness takes over, as the operator's.
    expect(holding!.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    expect(holding!.startupProbe!.periodSeconds! * holding!.startupProbe!.failureThreshold!).toBeGreaterThanOrEqual(60);
    // A drain (SIGTERM) takes it out of the holder Service before the holder closes: readiness must notice within it.
    expect(holding!.readinessProbe!.periodSeconds! * holding!.readinessProbe!.failureThreshold!).toBeLessThan(5);
    const pdb = objectOf<V1PodDisruptionBudget>(chart, 'PodDisruptionBudget', ACTIVATOR);
    expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: activator.spec!.selector.matchLabels } });
  });

  it('admits the operator and activator pods, and only them of the release, to App pods when the NetworkPolicy is on', async () => {
    const peers = (await operatorConfigOf(objectOf<V1ConfigMap>(renderWith(valuesFiles, { apps: { networkPolicy: { enabled: true } } }), 'ConfigMap', `${NAME}-config`))).networkPolicy!.operatorPods;
    const withPostgres = renderWith(valuesFiles);
    const podLabels = (kind: string, name: string) => objectOf<V1Deployment | V1StatefulSet>(withPostgres, kind, name).spec!.template.metadata!.labels!;
    const matches = (labels: Record<string, string>) => Object.entries(peers.matchLabels).every(([key, value]) => labels[key] === value);
    expect(peers.namespace).toBe(RELEASE.namespace);
    expect(matches(podLabels('Deployment', NAME))).toBe(true);
    expect(matches(podLabels('Deployment', ACTIVATOR))).toBe(true);
    expect(matches(podLabels('StatefulSet', 'runlet-postgres'))).toBe(false);
  });

  it('elects the leader on the one Lease its Role may renew, in the release namespace', async () => {
    const config = await operatorConfigOf(configMap);
    const role = objectOf<V1Role>(chart, 'Role', `${NAME}-leader-election`);
    expect(config.leaderElection).toMatchObject({ namespace: RELEASE.namespace, leaseName: NAME, identity: 'runlet-operator-7d9f-abcde' });
    expect(role.rules!.find((rule) => rule.resourceNames !== undefined)?.resourceNames).toEqual([config.leaderElection.leaseName]);
  });

  it('writes images, pull secrets, ingress, network policy, webhook allow-list, native sidecars and log level from the values into the configuration', async () => {
    const config = await operatorConfigOf(configMap);
    const { leaderElection: _election, ...settings } = config;
    const expected =
      label === 'default'
        ? {
            sidecarImage: 'runlet/runlet:0.1.0',
            pythonRuntimeImage: 'runlet/python-runtime:0.1.0',
            ingress: null,
            // On by default, the run port open to every pod (no ingress controller named), the admin port to the release's operator and activator pods.
            networkPolicy: {
              runFromNamespaces: [],
              metricsFromNamespaces: [],
              operatorPods: { namespace: RELEASE.namespace, matchLabels: { 'app.kubernetes.io/instance': 'runlet', 'runlet.dev/app-peer': 'true' } },
            },
            nativeSidecars: 'auto',
            webhookAllowCidrs: [],
            imagePullSecrets: [],
            logLevel: 'info',
          }
        : {
            sidecarImage: 'registry.example.com/platform/runlet:0.1.0',
            pythonRuntimeImage: 'registry.example.com/platform/python-runtime:0.1.0-cuda12',
            ingress: {
              className: 'nginx',
              host: 'apps.example.com',
              tls: true,
              tlsSecretName: 'apps-example-com-tls',
              annotations: { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '43200', 'nginx.ingress.kubernetes.io/proxy-buffering': 'off' },
            },
            networkPolicy: {
              ingressController: {
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
                podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ingress-nginx' } },
              },
              runFromNamespaces: ['batch-jobs'],
              metricsFromNamespaces: ['monitoring'],
              // The operator and activator pods (their shared label).
              operatorPods: { namespace: RELEASE.namespace, matchLabels: { 'app.kubernetes.io/instance': 'runlet', 'runlet.dev/app-peer': 'true' } },
            },
            nativeSidecars: false,
            webhookAllowCidrs: ['10.20.0.0/16', '192.168.100.0/24'],
            imagePullSecrets: [{ name: 'registry-example-com' }],
            logLevel: 'debug',
          };
    expect(settings).toMatchObject(expected);
    expect(container.image).toBe(config.sidecarImage);
  });

  it('says in the notes how to reach the operator, grant read access to runs and the cancel of runs', () => {
    expect(chart.notes).toContain(`logs deployment/${NAME}`);
    expect(chart.notes).toContain('--clusterrole runlet-runs-viewer');
    expect(chart.notes).toContain('--clusterrole runlet-runs-operator');
    expect(chart.notes).toContain(label === 'default' ? `port-forward service/${NAME} 8080:80` : 'https://runlet-api.example.com/v2/projects/');
  });
});

describe('the Kubernetes versions the chart supports', () => {
  it.each([
    ['v1.20.2', 'policy/v1beta1'],
    ['v1.21.0', 'policy/v1'],
    ['v1.30.2-eks-1552ad0', 'policy/v1'],
  ])('on %s the PodDisruptionBudget is %s', (version, apiVersion) => {
    const chart = renderChart(CHART_DIR, { release: RELEASE, kubeVersion: version });
    expect(objectOf(chart, 'PodDisruptionBudget', NAME).apiVersion).toBe(apiVersion);
  });
});

describe('operator.logLevel', () => {
  it.each(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])('%s is a level both the operator and runlet activator take', async (level) => {
    const chart = renderWith([], { operator: { logLevel: level } });
    expect((await operatorConfigOf(objectOf<V1ConfigMap>(chart, 'ConfigMap', `${NAME}-config`))).logLevel).toBe(level);
    const args = objectOf<V1Deployment>(chart, 'Deployment', ACTIVATOR).spec!.template.spec!.containers[0]!.args!;
    expect(args.slice(-2)).toEqual(['--log-level', level]);
    // A port out of range stops it after the log level is checked, before it reaches for any credential.
    await expect(runActivatorCommand([...args.slice(1), '--port', '70000'])).rejects.toThrow('--port must be a port number, got "70000"');
  });
});

describe('holder.enabled false', () => {
  it('runs no holder: the configuration says so, and neither the activator nor the Service nor their RBAC is rendered', async () => {
    const chart = renderWith([], { holder: { enabled: false } });
    const config = await operatorConfigOf(objectOf<V1ConfigMap>(chart, 'ConfigMap', `${NAME}-config`));
    expect(config.holder.enabled).toBe(false);
    // No holder port (the collector's is the results store's).
    expect(operatorContainer(objectOf<V1Deployment>(chart, 'Deployment', NAME)).ports!.map((port) => port.name)).toEqual(['http', 'metrics', 'collector']);
    const names = chart.manifests.map((m) => `${m.object.kind}/${m.object.metadata.name}`);
    expect(names.filter((name) => name.includes('holder') || name.includes('activator'))).toEqual([]);
  });

  it('moves the holder to holder.port, on the activator pods and the Service', () => {
    const chart = renderWith([], { holder: { port: 9000, replicas: 3 } });
    expect(objectOf<V1Service>(chart, 'Service', 'runlet-holder').spec!.ports![0]!.port).toBe(9000);
    const activator = objectOf<V1Deployment>(chart, 'Deployment', ACTIVATOR);
    expect(activator.spec!.replicas).toBe(3);
    const [holding] = activator.spec!.template.spec!.containers;
    expect(holding!.ports).toContainEqual({ name: 'holder', containerPort: 9000, protocol: 'TCP' });
    expect(holding!.args!.slice(1, 3)).toEqual(['--port', '9000']);
  });

  it('tells the operator the activators’ admin port, where its leader asks them for the calls waiting there', async () => {
    const chart = renderWith([], { holder: { adminPort: 9081 } });
    const [holding] = objectOf<V1Deployment>(chart, 'Deployment', ACTIVATOR).spec!.template.spec!.containers;
    expect(holding!.ports).toContainEqual(expect.objectContaining({ containerPort: 9081 }));
    expect((await operatorConfigOf(objectOf<V1ConfigMap>(chart, 'ConfigMap', `${NAME}-config`))).holder.activatorAdminPort).toBe(9081);
  });
});

describe('the management API Ingress', () => {
  it('is rendered only when api.ingress.enabled, for /v2 on the host with TLS', () => {
    expect(renderWith(VALUE_SETS.default).manifests.some((m) => m.object.kind === 'Ingress')).toBe(false);
    const ingress = objectOf<V1Ingress>(renderWith(VALUE_SETS.production), 'Ingress', NAME);
    expect(ingress.metadata!.annotations).toEqual({ 'cert-manager.io/cluster-issuer': 'letsencrypt' });
    expect(ingress.spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ hosts: ['runlet-api.example.com'], secretName: 'runlet-api-example-com-tls' }],
      rules: [
        {
          host: 'runlet-api.example.com',
          http: { paths: [{ path: '/v2', pathType: 'Prefix', backend: { service: { name: NAME, port: { name: 'http' } } } }] },
        },
      ],
    });
  });

  it('refuses TLS without a host, for the API and for the apps', () => {
    expect(() => renderWith([], { api: { ingress: { enabled: true, tls: true } } })).toThrow(/api\.ingress\.tls needs api\.ingress\.host/);
    expect(() => renderWith([], { apps: { ingress: { enabled: true, tls: true } } })).toThrow(/apps\.ingress\.tls needs apps\.ingress\.host/);
  });
});

describe('names and images', () => {
  it('prefixes names with the release name unless it already says runlet', () => {
    const names = renderWith([], undefined, { ...RELEASE, name: 'platform' }).manifests.map((m) => `${m.object.kind}/${m.object.metadata.name}`);
    expect(names).toContain('Deployment/platform-runlet-operator');
    expect(names).toContain('ClusterRole/platform-runlet-runs-viewer');
    expect(renderWith([], undefined, { ...RELEASE, name: 'runlet-eu' }).manifests.map((m) => m.object.metadata.name)).toContain('runlet-eu-operator');
  });

  it('takes the sidecar image from the operator image unless apps.sidecar.image says otherwise', async () => {
    const configOf = (values: Record<string, unknown>) => operatorConfigOf(objectOf<V1ConfigMap>(renderWith([], values), 'ConfigMap', `${NAME}-config`));
    expect((await configOf({ operator: { image: { repository: 'r.example/runlet', tag: '9.9.9' } } })).sidecarImage).toBe('r.example/runlet:9.9.9');
    expect((await configOf({ apps: { sidecar: { image: { repository: 'r.example/sidecar' } } } })).sidecarImage).toBe('r.example/sidecar:0.1.0');
  });
});
