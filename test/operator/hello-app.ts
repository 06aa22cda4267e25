// The App the end-to-end suite applies: examples/hello, its files in a code ConfigMap, in a namespace of
// its own; and reads of what the operator made of it.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type KubeConfig,
  type V1ConfigMap,
  type V1Deployment,
  type V1Namespace,
  type V1Pod,
  type V1Service,
} from '@kubernetes/client-node';
import { APP_LABEL } from '../../crds/api-group.ts';
import type { App } from '../../crds/app-schema.ts';
import { ENFORCE_LABEL } from '../kube/pod-security.ts';
import { REPO } from './e2e-cluster.ts';
import { enrolNamespace } from '../support/enrolment.ts';

export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const APPS = { group: 'runlet.dev', version: 'v1alpha1', plural: 'apps' };

export interface RunLogView {
  status?: { runs?: { id: string; status: string; functionName: string }[] };
}

export class HelloApp {
  readonly namespace: string;
  readonly name: string;
  readonly codeConfigMap: string;
  readonly minReplicas: number;
  /** spec.scaling beyond the fixed size the suites use: autoscaling settings. */
  readonly #scaling: Record<string, unknown>;
  readonly #auth: boolean;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #custom: CustomObjectsApi;
  readonly #image: string | undefined;
  readonly #kubeConfig: KubeConfig;

  /**
   * `name`: default hello; another name puts a second App of the same code in a namespace. `image`: the Python
   * runtime image the App names (default: the operator's). `auth`: default on (off where the cluster has no DNS
   * for the sidecar to reach the issuer's key set at kubernetes.default.svc).
   */
  constructor(
    kubeConfig: KubeConfig,
    namespace: string,
    options: { minReplicas?: number; name?: string; scaling?: Record<string, unknown>; image?: string; auth?: boolean } = {},
  ) {
    this.#image = options.image;
    this.#kubeConfig = kubeConfig;
    this.namespace = namespace;
    this.name = options.name ?? 'hello';
    this.codeConfigMap = `${this.name}-code`;
    this.minReplicas = options.minReplicas ?? 1;
    this.#scaling = options.scaling ?? {};
    this.#auth = options.auth ?? true;
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#apps = kubeConfig.makeApiClient(AppsV1Api);
    this.#custom = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  /**
   * Namespace (unless it exists), code ConfigMap (examples/hello) and the App, every field of its spec stated;
   * `prepareNamespace` runs between the namespace and the rest (e.g. a ResourceQuota).
   */
  async apply(prepareNamespace?: () => Promise<void>): Promise<void> {
    const [namespace, configMap, app] = await this.manifests();
    await this.#core.createNamespace({ body: namespace }).catch((error: unknown) => {
      if (!(error instanceof ApiException && error.code === 409)) throw error;
    });
    // A cluster admin enrols it, so that Runlet may write there (a no-op where no Runlet is installed).
    await enrolNamespace(this.#kubeConfig, this.namespace);
    await prepareNamespace?.();
    await this.#core.createNamespacedConfigMap({ namespace: this.namespace, body: configMap });
    await this.#custom.createNamespacedCustomObject({ ...APPS, namespace: this.namespace, body: app });
  }

  /** What apply() creates, as manifests (e.g. for `kubectl apply`). */
  async manifests(): Promise<[V1Namespace, V1ConfigMap, App]> {
    const files = ['main.py', 'service.toml'];
    const data = Object.fromEntries(await Promise.all(files.map(async (file) => [file, await readFile(join(REPO, 'examples/hello', file), 'utf8')])));
    return [
      // Pods here must pass the restricted Pod Security Standard (enforced by servers from 1.23 and the fake).
      // The test kubelet runs containers as local processes: it cannot make their root filesystem read-only or
      // run them as their runAsUser, so those settings are checked on the rendered pods (operator/render/).
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: this.namespace, labels: { [ENFORCE_LABEL]: 'restricted' } } },
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: this.codeConfigMap, namespace: this.namespace, labels: { [APP_LABEL]: this.name } },
        data,
      },
      {
        apiVersion: 'runlet.dev/v1alpha1',
        kind: 'App',
        metadata: { name: this.name, namespace: this.namespace },
        spec: {
          runtime: { python: { module: 'main', code: { configMap: { name: this.codeConfigMap } }, ...(this.#image === undefined ? {} : { image: this.#image }) } },
          scaling: { minReplicas: this.minReplicas, maxReplicas: this.minReplicas, replicaConcurrency: 4, responseGracePeriod: 60, ...this.#scaling },
          auth: { enabled: this.#auth },
          runs: { keepFinished: 200, retention: 86400 },
        },
      } as App,
    ];
  }

  async read(): Promise<App> {
    return (await this.#custom.getNamespacedCustomObject({ ...APPS, namespace: this.namespace, name: this.name })) as App;
  }

  async patchSpec(spec: Record<string, unknown>): Promise<void> {
    await this.#custom.patchNamespacedCustomObject({ ...APPS, namespace: this.namespace, name: this.name, body: { spec } }, MERGE_PATCH);
  }

  async replaceCode(file: string, content: string): Promise<void> {
    await this.#core.patchNamespacedConfigMap({ namespace: this.namespace, name: this.codeConfigMap, body: { data: { [file]: content } } }, MERGE_PATCH);
  }

  /** Removes the namespace and everything in it (the suite's cleanup on a real cluster). */
  async deleteNamespace(): Promise<void> {
    await this.#core.deleteNamespace({ name: this.namespace });
  }

  async delete(): Promise<void> {
    await this.#custom.deleteNamespacedCustomObject({ ...APPS, namespace: this.namespace, name: this.name });
  }

  /** The App's pods, by the label the operator selects them with. */
  async pods(): Promise<V1Pod[]> {
    return (await this.#core.listNamespacedPod({ namespace: this.namespace, labelSelector: `${APP_LABEL}=${this.name}` })).items;
  }

  async deployment(): Promise<V1Deployment | undefined> {
    return (await this.#apps.listNamespacedDeployment({ namespace: this.namespace, labelSelector: `${APP_LABEL}=${this.name}` })).items[0];
  }

  async services(): Promise<V1Service[]> {
    return (await this.#core.listNamespacedService({ namespace: this.namespace, labelSelector: `${APP_LABEL}=${this.name}` })).items;
  }

  /** The Events about the App (what `kubectl describe app` lists). */
  async events(): Promise<CoreV1Event[]> {
    return (await this.#core.listNamespacedEvent({ namespace: this.namespace, fieldSelector: `involvedObject.name=${this.name}` })).items.filter(
      (event) => event.involvedObject.kind === 'App',
    );
  }

  /** The RunLog a pod's sidecar records its runs in; undefined until it exists. */
  async runLog(podName: string): Promise<RunLogView | undefined> {
    try {
      const runLogs = { group: 'runlet.dev', version: 'v1alpha1', plural: 'runlogs' };
      return (await this.#custom.getNamespacedCustomObject({ ...runLogs, namespace: this.namespace, name: podName })) as RunLogView;
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw error;
    }
  }
}
