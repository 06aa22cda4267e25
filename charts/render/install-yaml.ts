// `npm run install-yaml`: refreshes what is derived from other files of the repository —
//   charts/runlet/crds/*.yaml   copies of crds/*.yaml (Helm installs a chart's crds/ folder as it is), and
//   install.yaml                the chart rendered with its default values, for `kubectl apply -f`.
// test/chart/install-yaml.test.ts and test/chart/crds.test.ts fail while either is stale.
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderChart, type RenderedManifest } from './render.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const CHART_DIR = join(REPO, 'charts/runlet');
export const INSTALL_YAML = join(REPO, 'install.yaml');
export const INSTALL_NAMESPACE = 'runlet-system';

/** Helm's install order (releaseutil.InstallOrder) for the kinds the chart renders: dependencies first. */
const INSTALL_ORDER = ['Namespace', 'NetworkPolicy', 'PodDisruptionBudget', 'ServiceAccount', 'ConfigMap', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'Service', 'Deployment', 'StatefulSet', 'Ingress'];

/** What charts/runlet/crds/ must hold: crds/*.yaml, byte for byte. */
export function chartCrdFiles(): { name: string; text: string }[] {
  const source = join(REPO, 'crds');
  return readdirSync(source)
    .filter((name) => name.endsWith('.yaml'))
    .sort()
    .map((name) => ({ name, text: readFileSync(join(source, name), 'utf8') }));
}

/** install.yaml: the Namespace, the CRDs, then the chart's objects in Helm's install order. */
export function installYaml(): string {
  // Release.Service names who manages the objects (app.kubernetes.io/managed-by): kubectl, not Helm, here.
  const chart = renderChart(CHART_DIR, { release: { name: 'runlet', namespace: INSTALL_NAMESPACE, service: 'kubectl' } });
  const header = [
    `# Runlet ${String(chart.chart.AppVersion)}: the Namespace ${INSTALL_NAMESPACE}, the CRDs, the operator, its management API and RBAC.`,
    '#   kubectl apply -f install.yaml',
    '# The Helm chart charts/runlet rendered with its default values by `npm run install-yaml`',
    '# (charts/render/install-yaml.ts). Do not edit: change the chart and run that again.',
  ].join('\n');
  const namespace = [
    'apiVersion: v1',
    'kind: Namespace',
    'metadata:',
    `  name: ${INSTALL_NAMESPACE}`,
    '  labels:',
    '    # The operator pods meet the restricted Pod Security Standard; nothing else runs here.',
    '    pod-security.kubernetes.io/enforce: restricted',
  ].join('\n');
  const crds = chart.crds.map((crd) => `# Source: charts/runlet/${crd.source}\n${crd.text.trim()}`);
  const objects = sortForInstall(chart.manifests).map((manifest) => `# Source: charts/runlet/${manifest.source}\n${manifest.text}`);
  return [header, namespace, ...crds, ...objects].join('\n---\n') + '\n';
}

function sortForInstall(manifests: RenderedManifest[]): RenderedManifest[] {
  const rank = (manifest: RenderedManifest) => {
    const index = INSTALL_ORDER.indexOf(manifest.object.kind);
    if (index === -1) throw new Error(`${manifest.source}: no install order for kind ${manifest.object.kind}; add it to INSTALL_ORDER`);
    return index;
  };
  return manifests.toSorted((a, b) => rank(a) - rank(b) || a.object.metadata.name.localeCompare(b.object.metadata.name));
}

function writeDerivedFiles(): void {
  const crdDir = join(CHART_DIR, 'crds');
  const wanted = chartCrdFiles();
  for (const stale of readdirSync(crdDir).filter((name) => !wanted.some((file) => file.name === name))) {
    rmSync(join(crdDir, stale));
    console.log(`removed charts/runlet/crds/${stale}`);
  }
  for (const file of wanted) {
    writeFileSync(join(crdDir, file.name), file.text);
    console.log(`wrote charts/runlet/crds/${file.name}`);
  }
  writeFileSync(INSTALL_YAML, installYaml());
  console.log('wrote install.yaml');
}

if (import.meta.main) writeDerivedFiles();
