// A container's environment as the kubelet computes it: `envFrom` first, then `env` in order, each value
// either literal (with `$(VAR)` references to earlier variables expanded) or taken from the pod's own
// fields (downward API), a ConfigMap key or a Secret key read from the API server.
import type { V1Container, V1EnvVar, V1Pod } from '@kubernetes/client-node';
import { configMapFiles, secretFiles, type ObjectSource } from './cluster-objects.ts';
import { PodSetupError } from './setup-error.ts';

/**
 * Where every local pod's processes listen and are reached: they all share the loopback interface. The node's
 * address, and what the downward API gives for `status.podIP` (a program binding to it must be able to);
 * the Pod API reports each pod at an address of its own instead (pod-network.ts).
 */
export const LOCAL_IP = '127.0.0.1';

/**
 * Kubernetes' dependent-variable expansion: `$(NAME)` becomes the value of NAME when NAME is defined,
 * `$$` is a literal `$`, and references to undefined names stay as written.
 */
export function expandReferences(text: string, defined: ReadonlyMap<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name: string | undefined) => {
    if (name === undefined) return '$';
    return defined.get(name) ?? whole;
  });
}

/** A downward-API field of the pod (env `fieldRef` and downwardAPI volume items). */
export function fieldValue(pod: V1Pod, fieldPath: string): string {
  const labelOrAnnotation = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (labelOrAnnotation !== null) {
    const map = labelOrAnnotation[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations;
    return map?.[labelOrAnnotation[2]!] ?? '';
  }
  const fields: Record<string, string | undefined> = {
    'metadata.name': pod.metadata?.name,
    'metadata.namespace': pod.metadata?.namespace,
    'metadata.uid': pod.metadata?.uid,
    'spec.nodeName': pod.spec?.nodeName,
    'spec.serviceAccountName': pod.spec?.serviceAccountName ?? 'default',
    'status.podIP': LOCAL_IP,
    'status.podIPs': LOCAL_IP,
    'status.hostIP': LOCAL_IP,
    'status.hostIPs': LOCAL_IP,
  };
  if (!(fieldPath in fields)) {
    throw new PodSetupError('CreateContainerConfigError', `fieldRef "${fieldPath}" is not supported by the test kubelet`);
  }
  return fields[fieldPath] ?? '';
}

type SourceKind = 'ConfigMap' | 'Secret';

/** The keys of a ConfigMap or Secret, decoded; undefined when it does not exist. */
async function filesOf(kind: SourceKind, source: ObjectSource, namespace: string, name: string): Promise<Map<string, Buffer> | undefined> {
  if (kind === 'ConfigMap') {
    const configMap = await source.configMap(namespace, name);
    return configMap === undefined ? undefined : configMapFiles(configMap);
  }
  const secret = await source.secret(namespace, name);
  return secret === undefined ? undefined : secretFiles(secret);
}

async function keyOf(
  kind: SourceKind,
  source: ObjectSource,
  namespace: string,
  ref: { name?: string; key: string; optional?: boolean },
): Promise<string | undefined> {
  const name = ref.name ?? '';
  const files = await filesOf(kind, source, namespace, name);
  const value = files?.get(ref.key);
  if (value !== undefined) return value.toString('utf8');
  if (ref.optional === true) return undefined;
  const missing = files === undefined ? `${kind} "${name}" not found` : `key "${ref.key}" not found in ${kind} "${name}"`;
  throw new PodSetupError('CreateContainerConfigError', `${missing} (namespace ${namespace})`);
}

async function valueOf(
  variable: V1EnvVar,
  pod: V1Pod,
  source: ObjectSource,
  defined: ReadonlyMap<string, string>,
): Promise<string | undefined> {
  const from = variable.valueFrom;
  if (from === undefined) return expandReferences(variable.value ?? '', defined);
  const namespace = pod.metadata?.namespace ?? 'default';
  if (from.fieldRef !== undefined) return fieldValue(pod, from.fieldRef.fieldPath);
  if (from.configMapKeyRef !== undefined) return keyOf('ConfigMap', source, namespace, from.configMapKeyRef);
  if (from.secretKeyRef !== undefined) return keyOf('Secret', source, namespace, from.secretKeyRef);
  throw new PodSetupError(
    'CreateContainerConfigError',
    `env ${variable.name}: only value, fieldRef, configMapKeyRef and secretKeyRef are supported by the test kubelet`,
  );
}

async function envFromEntries(container: V1Container, pod: V1Pod, source: ObjectSource): Promise<[string, string][]> {
  const namespace = pod.metadata?.namespace ?? 'default';
  const entries: [string, string][] = [];
  for (const from of container.envFrom ?? []) {
    const ref = from.configMapRef ?? from.secretRef;
    if (ref === undefined) continue;
    const name = ref.name ?? '';
    const kind: SourceKind = from.configMapRef !== undefined ? 'ConfigMap' : 'Secret';
    const files = await filesOf(kind, source, namespace, name);
    if (files === undefined) {
      if (ref.optional === true) continue;
      throw new PodSetupError('CreateContainerConfigError', `envFrom: ${kind} "${name}" not found (namespace ${namespace})`);
    }
    for (const [key, value] of files) entries.push([(from.prefix ?? '') + key, value.toString('utf8')]);
  }
  return entries;
}

/** The container's own variables in the order they take effect (a later one overrides an earlier one). */
export async function containerEnv(container: V1Container, pod: V1Pod, source: ObjectSource): Promise<Map<string, string>> {
  const env = new Map(await envFromEntries(container, pod, source));
  for (const variable of container.env ?? []) {
    const value = await valueOf(variable, pod, source, env);
    if (value !== undefined) env.set(variable.name, value);
  }
  return env;
}
