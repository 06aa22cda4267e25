// The chart rendered as the tests look at it: with its default values and with the production example,
// for the release `runlet` in `runlet-system` (what install.yaml uses too).
import { fileURLToPath } from 'node:url';
import { renderChart, type KubeManifest, type Release, type RenderedChart } from '../../charts/render/render.ts';

export const CHART_DIR = fileURLToPath(new URL('../../charts/runlet/', import.meta.url));
export const PRODUCTION_VALUES = fileURLToPath(new URL('../../charts/runlet/ci/production-values.yaml', import.meta.url));
export const RELEASE = { name: 'runlet', namespace: 'runlet-system' };

export const VALUE_SETS = {
  default: [] as string[],
  production: [PRODUCTION_VALUES],
};

export function renderWith(valuesFiles: string[], values?: Record<string, unknown>, release: Release = RELEASE): RenderedChart {
  return renderChart(CHART_DIR, { release, valuesFiles, values });
}

/** The one object of that kind and name; throws naming what there is otherwise. */
export function objectOf<T = KubeManifest>(chart: RenderedChart, kind: string, name: string): T {
  const found = chart.manifests.filter((manifest) => manifest.object.kind === kind && manifest.object.metadata.name === name);
  if (found.length !== 1) {
    const present = chart.manifests.map((manifest) => `${manifest.object.kind}/${manifest.object.metadata.name}`).join(', ');
    throw new Error(`expected one ${kind}/${name}, found ${found.length} among ${present}`);
  }
  return found[0]!.object as T;
}
