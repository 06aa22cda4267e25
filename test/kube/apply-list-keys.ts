// An applied configuration whose associative list leaves out a key field that has no default is refused by
// kube-apiserver 1.20 before anything else (structured-merge-diff builds the typed patch first): `protocol`,
// a key of Service ports and of container ports, is defaulted to TCP only after that. Later servers default
// it first; 1.20, the tier's server and the chart's oldest, does not, so the fake refuses as it does.
import { KubeError } from './status.ts';
import type { ResourceType } from './resources.ts';
import { isPlainObject, type KubeObject } from './types.ts';

/** Where pod specs sit in the kinds that hold one. */
const POD_SPEC_PATHS: Record<string, string[]> = {
  Pod: ['spec'],
  Deployment: ['spec', 'template', 'spec'],
  ReplicaSet: ['spec', 'template', 'spec'],
  StatefulSet: ['spec', 'template', 'spec'],
  DaemonSet: ['spec', 'template', 'spec'],
  Job: ['spec', 'template', 'spec'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template', 'spec'],
};

function at(object: unknown, path: readonly string[]): unknown {
  let value = object;
  for (const key of path) value = isPlainObject(value) ? value[key] : undefined;
  return value;
}

/** `.a.b` as structured-merge-diff writes a field path. */
function fieldPath(path: readonly string[]): string {
  return path.map((key) => (key.startsWith('[') ? key : `.${key}`)).join('');
}

/** The first element of `list` without `protocol`, as the real server reports it. */
function missingProtocol(list: unknown, path: readonly string[]): string | undefined {
  if (!Array.isArray(list)) return undefined;
  const index = list.findIndex((element) => isPlainObject(element) && element.protocol === undefined);
  if (index === -1) return undefined;
  return `failed to create typed patch object: ${fieldPath(path)}: element ${index}: associative list with keys has an element that omits key field "protocol" (and doesn't have default value)`;
}

/** What 1.20 answers (500, no reason) an apply of `applied`, or undefined when it takes it. */
export function appliedListKeyError(type: ResourceType, applied: KubeObject): KubeError | undefined {
  if (type.group !== '' && type.group !== 'apps' && type.group !== 'batch') return undefined;
  const problems: (string | undefined)[] = [];
  if (type.kind === 'Service') problems.push(missingProtocol(at(applied, ['spec', 'ports']), ['spec', 'ports']));
  const podSpecPath = POD_SPEC_PATHS[type.kind];
  if (podSpecPath !== undefined) {
    const podSpec = at(applied, podSpecPath);
    for (const list of ['initContainers', 'containers']) {
      const containers = at(podSpec, [list]);
      for (const container of Array.isArray(containers) ? containers : []) {
        const name = isPlainObject(container) ? String(container.name) : '';
        problems.push(missingProtocol(at(container, ['ports']), [...podSpecPath, list, `[name="${name}"]`, 'ports']));
      }
    }
  }
  const message = problems.find((problem) => problem !== undefined);
  return message === undefined ? undefined : new KubeError(500, '', message);
}
