// Probes that tell a starved container from a dead one. On a busy node (a burst of pods starting on two cores)
// the kubelet's probes time out while the processes are alive: a readiness probe that fails then takes a
// healthy replica out of its Service, and a liveness probe restarts it, losing every run in flight. So every
// probe of every container Runlet runs (the chart's and each App pod's) waits at least 5 s for an answer, and
// liveness and startup restart only after a minute of failed checks in a row.
import type { V1Container, V1PodSpec, V1Probe } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { renderDeployment } from '../../operator/render/deployment.ts';
import { pythonSpec, renderConfig, storedApp } from '../support/operator-apps.ts';
import { VALUE_SETS, renderWith } from './rendered.ts';

const MIN_TIMEOUT_SECONDS = 5;
const MIN_TOLERATED_SECONDS = 60;

type ProbeKind = 'startupProbe' | 'readinessProbe' | 'livenessProbe';

/** Each probe of each container, named for the failure message. */
function probesOf(owner: string, pod: V1PodSpec): { name: string; kind: ProbeKind; probe: V1Probe }[] {
  const containers: V1Container[] = [...(pod.initContainers ?? []), ...pod.containers];
  return containers.flatMap((container) =>
    (['startupProbe', 'readinessProbe', 'livenessProbe'] as const).flatMap((kind) =>
      container[kind] === undefined ? [] : [{ name: `${owner}/${container.name} ${kind}`, kind, probe: container[kind]! }],
    ),
  );
}

function chartPods(): { owner: string; pod: V1PodSpec }[] {
  const chart = renderWith(VALUE_SETS.production);
  return chart.manifests
    .map((manifest) => manifest.object as { kind: string; metadata: { name: string }; spec?: { template?: { spec?: V1PodSpec } } })
    .filter((object) => object.spec?.template?.spec !== undefined)
    .map((object) => ({ owner: `${object.kind}/${object.metadata.name}`, pod: object.spec!.template!.spec! }));
}

function appPods(): { owner: string; pod: V1PodSpec }[] {
  const custom = { runtime: { custom: { image: 'web:1', port: 8080, healthcheckEndpoint: '/health' } } };
  return [true, false].flatMap((nativeSidecars) => [
    { owner: `python app (native sidecars ${nativeSidecars})`, pod: renderDeployment(storedApp(pythonSpec()), renderConfig({ nativeSidecars }), { codeHash: undefined }).spec!.template.spec! },
    { owner: `custom app (native sidecars ${nativeSidecars})`, pod: renderDeployment(storedApp(custom), renderConfig({ nativeSidecars }), { codeHash: undefined }).spec!.template.spec! },
  ]);
}

describe('the probes of every container Runlet runs', () => {
  const probes = [...chartPods(), ...appPods()].flatMap(({ owner, pod }) => probesOf(owner, pod));

  it('covers the operator, the activator, PostgreSQL and both kinds of App pod', () => {
    const owners = new Set(probes.map((entry) => entry.name.split('/')[0]));
    expect(owners.size).toBeGreaterThanOrEqual(4);
    expect(probes.some((entry) => entry.name.includes('sidecar livenessProbe'))).toBe(true);
    expect(probes.some((entry) => entry.name.includes('custom app') && entry.name.includes('/app livenessProbe'))).toBe(true);
  });

  it(`wait at least ${MIN_TIMEOUT_SECONDS} s for an answer`, () => {
    const short = probes.filter(({ probe }) => (probe.timeoutSeconds ?? 1) < MIN_TIMEOUT_SECONDS).map((entry) => `${entry.name}: ${entry.probe.timeoutSeconds ?? 1} s`);
    expect(short).toEqual([]);
  });

  it(`restart a container (liveness) or give up on its start only after ${MIN_TOLERATED_SECONDS} s of failures in a row`, () => {
    const quick = probes
      .filter(({ kind }) => kind !== 'readinessProbe')
      .filter(({ probe }) => (probe.periodSeconds ?? 10) * (probe.failureThreshold ?? 3) < MIN_TOLERATED_SECONDS)
      .map((entry) => `${entry.name}: ${entry.probe.periodSeconds ?? 10} s × ${entry.probe.failureThreshold ?? 3}`);
    expect(quick).toEqual([]);
  });
});
