// The objects a pod's volumes and environment refer to, read from the API server when a pod starts.
import { ApiException, CoreV1Api, type KubeConfig, type V1ConfigMap, type V1Secret } from '@kubernetes/client-node';

export interface ObjectSource {
  configMap(namespace: string, name: string): Promise<V1ConfigMap | undefined>;
  secret(namespace: string, name: string): Promise<V1Secret | undefined>;
}

async function unlessNotFound<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

export function apiObjectSource(config: KubeConfig): ObjectSource {
  const core = config.makeApiClient(CoreV1Api);
  return {
    configMap: (namespace, name) => unlessNotFound(core.readNamespacedConfigMap({ namespace, name })),
    secret: (namespace, name) => unlessNotFound(core.readNamespacedSecret({ namespace, name })),
  };
}

/** The files a ConfigMap holds: `data` as UTF-8, `binaryData` decoded. */
export function configMapFiles(configMap: V1ConfigMap): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const [key, value] of Object.entries(configMap.data ?? {})) files.set(key, Buffer.from(value, 'utf8'));
  for (const [key, value] of Object.entries(configMap.binaryData ?? {})) files.set(key, Buffer.from(value, 'base64'));
  return files;
}

/** The files a Secret holds, decoded from base64. */
export function secretFiles(secret: V1Secret): Map<string, Buffer> {
  return new Map(Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64')]));
}
