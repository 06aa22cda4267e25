// The chart's run history database: an embedded PostgreSQL by default (a StatefulSet of the official image with
// a PersistentVolumeClaim, run as its non-root user on a read-only root), whose password no rendered object
// holds (the operator makes its Secret and reads its `dsn`); or a PostgreSQL of the user's, named by
// results.postgres.existingSecret (RUNLET_RESULTS_DSN from its `dsn`), and then nothing of the embedded one; or
// none (results.postgres.embedded.enabled false): run history in RunLogs.
import type { V1Deployment, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { kubernetesProblems } from './kube-validate.ts';
import { objectOf, renderWith, VALUE_SETS } from './rendered.ts';

/** The embedded PostgreSQL turned off, and no PostgreSQL of the user's: run history stays in RunLogs. */
const RUNLOGS = { results: { postgres: { embedded: { enabled: false } } } };

const PASSWORD_LIKE = /password\s*[:=]\s*["']?[A-Za-z0-9+/]{8,}/i;

describe('the embedded PostgreSQL (the default)', () => {
  const chart = renderWith(VALUE_SETS.default);
  const statefulSet = objectOf<V1StatefulSet>(chart, 'StatefulSet', 'runlet-postgres');
  const pod = statefulSet.spec!.template.spec!;
  const container = pod.containers[0]!;

  it('is one pod of postgres:15-bookworm with a 10Gi PersistentVolumeClaim of the default StorageClass', () => {
    expect(kubernetesProblems(statefulSet)).toEqual([]);
    expect(statefulSet.spec!.replicas).toBe(1);
    expect(container.image).toBe('postgres:15-bookworm');
    const [claim] = statefulSet.spec!.volumeClaimTemplates!;
    expect(claim!.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } });
    expect(container.volumeMounts).toContainEqual({ name: 'data', mountPath: '/var/lib/postgresql/data' });
    // initdb refuses a directory holding lost+found, which a volume's root may.
    expect(container.env).toContainEqual({ name: 'PGDATA', value: '/var/lib/postgresql/data/pgdata' });
    const service = objectOf<V1Service>(chart, 'Service', 'runlet-postgres');
    expect(service.spec!.ports).toEqual([{ name: 'postgres', port: 5432, targetPort: 'postgres', protocol: 'TCP' }]);
    expect(service.spec!.selector).toEqual(statefulSet.spec!.selector.matchLabels);
  });

  it('runs as the image’s postgres user, non-root, on a read-only root with writable socket and temp dirs', () => {
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 999, runAsGroup: 999, fsGroup: 999, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(container.volumeMounts!.map((mount) => mount.mountPath)).toEqual(['/var/lib/postgresql/data', '/var/run/postgresql', '/tmp']);
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      expect(probe?.exec?.command).toEqual(['pg_isready', '-h', '127.0.0.1', '-U', 'runlet', '-d', 'runlet']);
    }
  });

  it('takes its password from the Secret the operator makes, and no rendered object holds one', () => {
    expect(container.env).toContainEqual({ name: 'POSTGRES_PASSWORD', valueFrom: { secretKeyRef: { name: 'runlet-postgres', key: 'password' } } });
    expect(chart.manifests.filter((manifest) => manifest.object.kind === 'Secret')).toEqual([]);
    for (const manifest of chart.manifests) expect(JSON.stringify(manifest.object), manifest.source).not.toMatch(PASSWORD_LIKE);
    const operator = objectOf<V1Deployment>(chart, 'Deployment', 'runlet-operator').spec!.template.spec!.containers[0]!;
    // The operator makes the Secret and reads its `dsn` through the API: a secretKeyRef would be read only when
    // the container starts, before the Secret exists on a first install.
    expect(operator.env).toContainEqual({ name: 'RUNLET_RESULTS_POSTGRES_SECRET', value: 'runlet-postgres' });
    expect(operator.env).toContainEqual({ name: 'RUNLET_RESULTS_POSTGRES_HOST', value: 'runlet-postgres.runlet-system.svc' });
    expect(operator.env!.map((variable) => variable.name)).not.toContain('RUNLET_RESULTS_DSN');
    // And the sidecars send their records to its collector (a Service and port of its own), or the management API
    // would list none of them.
    expect(operator.env).toContainEqual({ name: 'RUNLET_RESULTS_COLLECTOR_URL', value: 'http://runlet-collector.runlet-system.svc:8082' });
    const collector = objectOf<{ spec: { ports: unknown[] } }>(chart, 'Service', 'runlet-collector');
    expect(collector.spec.ports).toEqual([{ name: 'collector', port: 8082, targetPort: 'collector', protocol: 'TCP' }]);
  });

  it('lets the operator read and create that Secret in the release namespace, and nothing more', () => {
    const role = objectOf<{ rules: unknown[] }>(chart, 'Role', 'runlet-operator-results');
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['runlet-postgres'], verbs: ['get'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    ]);
    const binding = objectOf<{ subjects: unknown[] }>(chart, 'RoleBinding', 'runlet-operator-results');
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'runlet-operator', namespace: 'runlet-system' }]);
  });

  it('takes a StorageClass, a size and a retention', () => {
    const sized = renderWith([], { results: { retentionDays: 90, postgres: { embedded: { storage: { size: '200Gi', storageClassName: 'fast-ssd' } } } } });
    const claim = objectOf<V1StatefulSet>(sized, 'StatefulSet', 'runlet-postgres').spec!.volumeClaimTemplates![0]!;
    expect(claim.spec).toMatchObject({ storageClassName: 'fast-ssd', resources: { requests: { storage: '200Gi' } } });
    const operator = objectOf<V1Deployment>(sized, 'Deployment', 'runlet-operator').spec!.template.spec!.containers[0]!;
    expect(operator.env).toContainEqual({ name: 'RUNLET_RESULTS_RETENTION_DAYS', value: '90' });
  });
});

describe('an external PostgreSQL (results.postgres.existingSecret)', () => {
  const chart = renderWith([], { results: { postgres: { existingSecret: 'managed-postgres' } } });

  it('renders nothing of the embedded one, and gives the operator the dsn of the named Secret (required)', () => {
    const names = chart.manifests.map((manifest) => `${manifest.object.kind}/${manifest.object.metadata.name}`);
    expect(names.filter((name) => /postgres|results/.test(name))).toEqual([]);
    const operator = objectOf<V1Deployment>(chart, 'Deployment', 'runlet-operator').spec!.template.spec!.containers[0]!;
    expect(operator.env).toContainEqual({ name: 'RUNLET_RESULTS_DSN', valueFrom: { secretKeyRef: { name: 'managed-postgres', key: 'dsn' } } });
    expect(operator.env).toContainEqual({ name: 'RUNLET_RESULTS_COLLECTOR_URL', value: 'http://runlet-collector.runlet-system.svc:8082' });
    expect(operator.env!.map((variable) => variable.name)).not.toContain('RUNLET_RESULTS_POSTGRES_SECRET');
  });
});

describe('no PostgreSQL (results.postgres.embedded.enabled false, no existingSecret)', () => {
  it('renders none, and gives the operator no database: run history in RunLogs', () => {
    const chart = renderWith(VALUE_SETS.default, RUNLOGS);
    const names = chart.manifests.map((manifest) => `${manifest.object.kind}/${manifest.object.metadata.name}`);
    expect(names.filter((name) => /postgres|results|collector/.test(name))).toEqual([]);
    const operator = objectOf<V1Deployment>(chart, 'Deployment', 'runlet-operator').spec!.template.spec!.containers[0]!;
    expect(operator.env!.map((variable) => variable.name).filter((name) => name.startsWith('RUNLET_RESULTS_'))).toEqual(['RUNLET_RESULTS_RETENTION_DAYS']);
    // No collector port: pods write RunLogs.
    expect(operator.ports!.map((port) => port.name)).toEqual(['http', 'metrics']);
  });
});
