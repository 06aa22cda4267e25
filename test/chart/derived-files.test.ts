// Files derived from others, checked to be current: `npm run install-yaml` (charts/render/install-yaml.ts)
// rewrites both when a test here fails.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { INSTALL_NAMESPACE, INSTALL_YAML, chartCrdFiles, installYaml } from '../../charts/render/install-yaml.ts';
import { kubernetesProblems } from './kube-validate.ts';
import { CHART_DIR } from './rendered.ts';

const STALE = 'is stale: run `npm run install-yaml`';

describe("the chart's crds/", () => {
  it('holds exactly the repository’s crds/*.yaml, byte for byte', () => {
    const inChart = readdirSync(join(CHART_DIR, 'crds')).sort();
    const expected = chartCrdFiles();
    expect(inChart, `charts/runlet/crds/ ${STALE}`).toEqual(expected.map((file) => file.name));
    for (const file of expected) {
      expect(readFileSync(join(CHART_DIR, 'crds', file.name), 'utf8') === file.text, `charts/runlet/crds/${file.name} ${STALE}`).toBe(true);
    }
  });
});

describe('install.yaml', () => {
  const committed = readFileSync(INSTALL_YAML, 'utf8');

  it('is the chart rendered with its default values, as `npm run install-yaml` writes it', () => {
    expect(committed === installYaml(), `install.yaml ${STALE}`).toBe(true);
  });

  it('creates its namespace first, then the CRDs, then valid objects in that namespace, and the held calls’ namespace before what is in it', () => {
    const objects = parseAllDocuments(committed, { version: '1.1' }).map((document) => {
      expect(document.errors).toEqual([]);
      return document.toJS() as { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> } };
    });
    expect(objects[0]).toMatchObject({ kind: 'Namespace', metadata: { name: INSTALL_NAMESPACE, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } });
    expect(objects.slice(1, 3).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['CustomResourceDefinition/apps.runlet.dev', 'CustomResourceDefinition/runlogs.runlet.dev']);
    expect(objects.flatMap((object) => kubernetesProblems(object).map((problem) => `${object.kind}/${object.metadata.name}: ${problem}`))).toEqual([]);
    const heldCalls = `${INSTALL_NAMESPACE}-held`;
    const heldNamespaceAt = objects.findIndex((object) => object.kind === 'Namespace' && object.metadata.name === heldCalls);
    expect(heldNamespaceAt).toBe(3);
    const inHeldCalls = objects.filter((object) => object.metadata.namespace === heldCalls).map((object) => `${object.kind}/${object.metadata.name}`);
    expect(inHeldCalls.sort()).toEqual(['Role/runlet-activator-held-calls', 'Role/runlet-operator-held-calls', 'RoleBinding/runlet-activator-held-calls', 'RoleBinding/runlet-operator-held-calls']);
    for (const object of objects.slice(4)) {
      const name = `${object.kind}/${object.metadata.name}`;
      if (!['ClusterRole', 'ClusterRoleBinding'].includes(object.kind)) expect(object.metadata.namespace, name).toBe(inHeldCalls.includes(name) ? heldCalls : INSTALL_NAMESPACE);
      // Applied with kubectl, not installed by Helm.
      expect(object.metadata.labels?.['app.kubernetes.io/managed-by'], `${object.kind}/${object.metadata.name}`).toBe('kubectl');
    }
    expect(objects.filter((object) => object.kind === 'Deployment').map((object) => object.metadata.name).sort()).toEqual(['runlet-activator', 'runlet-operator']);
  });
});
