// The test harness's kubelet (and, on the fake API server, Deployment controller): keeps every Deployment's
// pods in the fake API server at `spec.replicas` of the current template, rolling out template changes, and
// runs each pod bound to its node as local processes (pod-runner.ts), reporting Pod and Deployment status
// through the status subresource. One serial reconcile loop does it all, relisting Deployments and Pods each
// time, woken by watches and by changes in the local pods. On a real control plane (`realControlPlane`) it
// is only a kubelet: it registers a Node and runs the pods the scheduler binds to it.
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { ChangeFeed } from './change-feed.ts';
import { type InClusterApi } from './in-cluster.ts';
import { apiObjectSource, type ObjectSource } from './cluster-objects.ts';
import { ConditionClock } from './conditions.ts';
import type { ImageTable } from './images.ts';
import { LogFile } from './log-file.ts';
import { NodeRegistration } from './node.ts';
import { KUBELET_FINALIZER, TEMPLATE_HASH_LABEL, podForDeployment } from './pod-factory.ts';
import { PodNetwork } from './pod-network.ts';
import { publishDialMap, type DialMap } from './pod-network-dials.ts';
import { PodRunner } from './pod-runner.ts';
import { PodSetupError } from './setup-error.ts';
import type { ServiceAccountTokenSource } from './volumes.ts';
import type { HookRequests } from './probe-action.ts';
import { deploymentStatus, planRollout, type OwnedPod, type RolloutSpec } from './rollout.ts';
import { SerialTask } from './serial-task.ts';
import { templateHash } from './template-hash.ts';
import { DEFAULT_TIMING, type KubeletTiming } from './timing.ts';

export interface KubeletOptions {
  /** Where the API server is. */
  kubeConfig: KubeConfig;
  /** Which local programs stand for the images pods run. */
  images: ImageTable;
  /** Pod directories and logs go here; default a new temporary directory. */
  workDir?: string;
  /** The node pods are bound to; default `runlet-test-node`. */
  nodeName?: string;
  timing?: Partial<KubeletTiming>;
  /**
   * The token projected serviceAccountToken volumes hold. Default: for a source naming an audience, a token of the
   * pod's ServiceAccount from the API server's TokenRequest, bound to the pod, for that audience and lifetime, as
   * a kubelet asks it (the fake server's TokenReview then names the pod); for one naming none (the API server's own
   * audience, which the fake server does not check), `test-kubelet-token.<namespace>.<serviceAccountName>`.
   */
  serviceAccountToken?: ServiceAccountTokenSource;
  /**
   * The API server is a real one, with its controllers and scheduler, reached by pods at this address: the
   * kubelet then registers its Node (the scheduler binds pods to it), creates no pods itself, finishes a
   * graceful deletion by deleting the pod once its processes are gone, and gives containers the in-cluster
   * API address (in-cluster.ts). Default: the fake API server, for which the kubelet is also the Deployment
   * controller.
   */
  realControlPlane?: InClusterApi;
  /**
   * How httpGet lifecycle hooks are asked: `consistent` (default) as kubelets from 1.26 ask them, like probes
   * (headers, the path as given); `before-1.26` as older kubelets did: no headers, and the URL
   * `http://<ip>:<port>/` + path, so a path `/drain` arrives as `//drain` (the control-plane tier's 1.20).
   */
  hookRequests?: HookRequests;
  /**
   * Where to publish which loopback port stands for each pod IP's port, for the pods' own processes to dial
   * other pods (pod-network-dials.ts; the images' `node` then imports pod-network-preload.ts). Default none.
   */
  podNetworkFile?: string;
}

function defaultServiceAccountToken(core: CoreV1Api): ServiceAccountTokenSource {
  return async (pod, audience, expirationSeconds) => {
    const namespace = pod.metadata?.namespace ?? 'default';
    const serviceAccount = pod.spec?.serviceAccountName ?? 'default';
    if (audience === undefined) return `test-kubelet-token.${namespace}.${serviceAccount}`;
    const boundObjectRef = { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! };
    // As a kubelet: a TokenRequest refused (the ServiceAccount not made yet) leaves the pod ContainerCreating, tried again.
    const request = await core
      .createNamespacedServiceAccountToken({ namespace, name: serviceAccount, body: { spec: { audiences: [audience], expirationSeconds, boundObjectRef } } })
      .catch((error: unknown) => {
        throw new PodSetupError('ContainerCreating', `the TokenRequest of ${namespace}/${serviceAccount} for audience ${audience} failed: ${(error as Error).message}`);
      });
    const token = request.status?.token;
    if (token === undefined) throw new PodSetupError('ContainerCreating', `the TokenRequest of ${namespace}/${serviceAccount} for audience ${audience} answered no token`);
    return token;
  };
}

export interface PodFilter {
  namespace?: string;
  /** Every one of these labels, with these values. */
  labels?: Record<string, string>;
}

/** How long stop() lets each pod's containers drain before SIGKILL, unless the pod allows less. */
const STOP_GRACE_SECONDS = 15;
const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function isNotFound(error: unknown): boolean {
  return error instanceof ApiException && error.code === 404;
}

function isConflict(error: unknown): boolean {
  return error instanceof ApiException && error.code === 409;
}

/** The API server would not have the pod (quota, admission, a webhook): 403 Forbidden or 422 Invalid. */
function isRefusal(error: unknown): error is ApiException<unknown> {
  return error instanceof ApiException && (error.code === 403 || error.code === 422);
}

/** The message of the Status the API server answered, as the ReplicaSet controller records it. */
function statusMessage(error: ApiException<unknown>): string {
  const body: unknown = typeof error.body === 'string' ? safeJson(error.body) : error.body;
  const message = (body as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : error.message;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function controllerUid(pod: V1Pod): string | undefined {
  return pod.metadata?.ownerReferences?.find((ref) => ref.controller === true)?.uid;
}

function rolloutSpec(deployment: V1Deployment): RolloutSpec {
  const strategy = deployment.spec?.strategy;
  return {
    replicas: deployment.spec?.replicas ?? 1,
    strategy: strategy?.type === 'Recreate' ? 'Recreate' : 'RollingUpdate',
    maxSurge: strategy?.rollingUpdate?.maxSurge,
    maxUnavailable: strategy?.rollingUpdate?.maxUnavailable,
  };
}

function key(pod: V1Pod): string {
  return `${pod.metadata?.namespace}/${pod.metadata?.name}`;
}

export class Kubelet {
  readonly nodeName: string;
  readonly workDir: string;
  /** The kubelet's own log: pods created and deleted, API errors. Each pod has its own (PodRunner.log.path). */
  readonly log: LogFile;
  /** The pods' addresses, and where a connection to one of them really goes (pod-network.ts). */
  readonly network = new PodNetwork();

  readonly #options: KubeletOptions;
  readonly #timing: KubeletTiming;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #source: ObjectSource;
  readonly #feed: ChangeFeed;
  readonly #loop: SerialTask;
  readonly #node: NodeRegistration | undefined;
  /** Local pods by uid. */
  readonly #runners = new Map<string, PodRunner>();
  /** Runners whose processes have all exited. */
  readonly #stoppedRunners = new Set<PodRunner>();
  /** The last status written, by object uid: only the kubelet writes these, so a diff against it suffices. */
  readonly #writtenStatus = new Map<string, string>();
  readonly #deploymentClocks = new Map<string, ConditionClock>();
  readonly #killOnExit = (): void => this.#killEverything();
  #stopped = false;

  constructor(options: KubeletOptions, workDir: string) {
    this.#options = options;
    this.nodeName = options.nodeName ?? 'runlet-test-node';
    this.workDir = workDir;
    this.#timing = { ...DEFAULT_TIMING, ...options.timing };
    this.log = new LogFile(join(workDir, 'kubelet.log'));
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.#source = apiObjectSource(options.kubeConfig);
    this.#loop = new SerialTask(() => this.#reconcile(), (error) => this.log.error('reconcile failed; retrying', error), this.#timing.retryMs);
    const real = options.realControlPlane !== undefined;
    this.#feed = new ChangeFeed(options.kubeConfig, this.log, this.#timing.retryMs, () => this.#loop.request(), { deployments: !real });
    this.#node = real ? new NodeRegistration(options.kubeConfig, this.nodeName, this.log) : undefined;
  }

  async start(): Promise<void> {
    process.once('exit', this.#killOnExit);
    await this.#node?.start();
    await this.#feed.start();
    this.#loop.request();
  }

  /** Pods running (or stopping) here, optionally only those in a namespace or with some labels. */
  pods(filter: PodFilter = {}): PodRunner[] {
    return [...this.#runners.values()].filter((runner) => {
      if (filter.namespace !== undefined && runner.namespace !== filter.namespace) return false;
      const labels = runner.pod.metadata?.labels ?? {};
      return Object.entries(filter.labels ?? {}).every(([name, value]) => labels[name] === value);
    });
  }

  pod(name: string, namespace = 'default'): PodRunner | undefined {
    return this.pods({ namespace }).find((runner) => runner.name === name);
  }

  /** The kubelet's log followed by every pod's, for a failing test to print. */
  diagnostics(): string {
    const pods = [...this.#runners.values(), ...this.#stoppedRunners];
    return [`== ${this.log.path}`, this.log.read(), ...pods.flatMap((runner) => [`== ${runner.log.path}`, runner.log.read()])].join('\n');
  }

  /**
   * Stops watching and stops every local pod: preStop hooks, SIGTERM, SIGKILL after the pod's grace period
   * or `gracePeriodSeconds` (default 15 s), whichever is shorter. Leaves the API server's objects alone.
   */
  async stop(options: { gracePeriodSeconds?: number } = {}): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await this.#feed.stop();
    await this.#loop.stop();
    this.#node?.stop();
    const cap = options.gracePeriodSeconds ?? STOP_GRACE_SECONDS;
    await Promise.all(
      [...this.#runners.values()].map((runner) => runner.stop(Math.min(cap, runner.pod.spec?.terminationGracePeriodSeconds ?? cap))),
    );
    process.off('exit', this.#killOnExit);
    this.log.event('kubelet stopped');
    await this.log.close();
  }

  async #reconcile(): Promise<void> {
    if (this.#stopped) return;
    if (this.#options.realControlPlane !== undefined) {
      const pods = await this.#core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${this.nodeName}` });
      await this.#syncLocalPods(pods.items);
      return;
    }
    const [deployments, pods] = await Promise.all([
      this.#apps.listDeploymentForAllNamespaces(),
      this.#core.listPodForAllNamespaces(),
    ]);
    const ready = await this.#syncLocalPods(pods.items.filter((pod) => pod.spec?.nodeName === this.nodeName));
    const refused: string[] = [];
    for (const deployment of deployments.items) {
      if (this.#stopped) return;
      if (deployment.metadata?.deletionTimestamp !== undefined) continue;
      const refusal = await this.#syncDeployment(deployment, pods.items.filter((pod) => controllerUid(pod) === deployment.metadata?.uid), ready);
      if (refusal !== undefined) refused.push(`deployment ${deployment.metadata?.namespace}/${deployment.metadata?.name}: ${refusal}`);
    }
    // Retried after a delay, as the ReplicaSet controller requeues a refused create.
    if (refused.length > 0) throw new Error(`pods refused: ${refused.join('; ')}`);
  }

  /**
   * Starts pods bound here, stops deleted ones (then lets them go), and publishes their status. Returns
   * which pods were published Ready: the rollout decides on exactly that, so a pod is never deleted for a
   * replacement whose readiness the API server does not show yet.
   */
  async #syncLocalPods(pods: V1Pod[]): Promise<Map<string, boolean>> {
    const present = new Set<string>();
    const ready = new Map<string, boolean>();
    for (const pod of pods) {
      const uid = pod.metadata!.uid!;
      present.add(uid);
      let runner = this.#runners.get(uid);
      const deleted = pod.metadata?.deletionTimestamp !== undefined;
      if (runner === undefined && !deleted) runner = await this.#startPod(pod);
      if (deleted) {
        if (runner !== undefined && !this.#stoppedRunners.has(runner)) {
          this.#stopPod(runner, 'deleted');
        } else {
          await this.#releasePod(pod);
          continue;
        }
      }
      ready.set(uid, await this.#publishPodStatus(runner!));
    }
    // Pods that vanished without passing through deletion (their finalizer was removed by someone else).
    for (const [uid, runner] of this.#runners) {
      if (present.has(uid)) continue;
      if (this.#stoppedRunners.has(runner)) this.#forget(runner);
      else this.#stopPod(runner, 'gone from the API server');
    }
    return ready;
  }

  async #startPod(pod: V1Pod): Promise<PodRunner> {
    const dir = join(this.workDir, 'pods', `${pod.metadata!.namespace}_${pod.metadata!.name}`);
    await mkdir(dir, { recursive: true });
    // The address stands for the runner's local ports, which exist once it is set up.
    let runner: PodRunner | undefined;
    const podIP = this.network.assign(`pod ${key(pod)}`, { localPort: (port) => runner!.localPort(port) });
    runner = new PodRunner({
      pod,
      images: this.#options.images,
      source: this.#source,
      serviceAccountToken: this.#options.serviceAccountToken ?? defaultServiceAccountToken(this.#core),
      inClusterApi: this.#options.realControlPlane,
      hookRequests: this.#options.hookRequests ?? 'consistent',
      timing: this.#timing,
      dir,
      podIP,
      logPath: join(this.workDir, `${pod.metadata!.namespace}_${pod.metadata!.name}.log`),
      onChange: () => this.#loop.request(),
    });
    this.#runners.set(runner.uid, runner);
    this.log.event(`starting pod ${key(pod)} at ${podIP}; log ${runner.log.path}`);
    runner.start();
    return runner;
  }

  #stopPod(runner: PodRunner, why: string): void {
    if (runner.terminating) return;
    this.log.event(`stopping pod ${runner.namespace}/${runner.name}: ${why}`);
    void runner.stop().then(
      () => {
        this.#stoppedRunners.add(runner);
        this.log.event(`pod ${runner.namespace}/${runner.name} stopped`);
        this.#loop.request();
      },
      (error: unknown) => this.log.error(`stopping pod ${runner.namespace}/${runner.name} failed`, error),
    );
  }

  /**
   * The pod's processes are gone: remove the finalizer so the fake API server can delete it, or, on a real
   * one, end the graceful deletion as a kubelet does (delete again with grace period 0, for this pod only).
   */
  async #releasePod(pod: V1Pod): Promise<void> {
    const runner = this.#runners.get(pod.metadata!.uid!);
    if (runner !== undefined) this.#forget(runner);
    const finalizers = pod.metadata?.finalizers ?? [];
    if (this.#options.realControlPlane !== undefined) {
      await this.#deleteNow(pod);
      return;
    }
    if (!finalizers.includes(KUBELET_FINALIZER)) return;
    const remaining = finalizers.filter((finalizer) => finalizer !== KUBELET_FINALIZER);
    try {
      await this.#core.patchNamespacedPod(
        {
          name: pod.metadata!.name!,
          namespace: pod.metadata!.namespace!,
          // The resourceVersion makes it a compare-and-swap: a concurrent finalizer change is not lost.
          body: { metadata: { resourceVersion: pod.metadata!.resourceVersion, finalizers: remaining.length > 0 ? remaining : null } },
        },
        MERGE_PATCH,
      );
      this.log.event(`released pod ${key(pod)}`);
    } catch (error) {
      if (isNotFound(error)) return;
      if (isConflict(error)) {
        this.#loop.request();
        return;
      }
      throw error;
    }
  }

  async #deleteNow(pod: V1Pod): Promise<void> {
    try {
      await this.#core.deleteNamespacedPod({
        name: pod.metadata!.name!,
        namespace: pod.metadata!.namespace!,
        // In the body, not the query: a body's DeleteOptions replace the query's, grace period included.
        body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata!.uid! } },
      });
      this.log.event(`deleted pod ${key(pod)}: its processes are gone`);
    } catch (error) {
      if (isNotFound(error) || isConflict(error)) return;
      throw error;
    }
  }

  #forget(runner: PodRunner): void {
    this.#runners.delete(runner.uid);
    this.network.release(runner.podIP);
    this.#writtenStatus.delete(runner.uid);
    this.#publishDialMap();
  }

  /** Writes the pod's status if it changed; returns whether it says Ready. */
  /** The pods' addresses and ports, for their processes to dial one another (pod-network-dials.ts). */
  #publishDialMap(): void {
    const file = this.#options.podNetworkFile;
    if (file === undefined) return;
    const map: DialMap = {};
    for (const runner of this.#runners.values()) if (runner.ports.size > 0) map[runner.podIP] = Object.fromEntries([...runner.ports].map(([podPort, local]) => [String(podPort), local]));
    publishDialMap(file, map);
  }

  async #publishPodStatus(runner: PodRunner): Promise<boolean> {
    const status = runner.status();
    const ready = status.conditions.some((condition) => condition.type === 'Ready' && condition.status === 'True');
    const text = JSON.stringify(status);
    if (this.#writtenStatus.get(runner.uid) === text) return ready;
    // Its ports exist once it reports a status: other pods may dial it from now on.
    this.#publishDialMap();
    try {
      await this.#core.patchNamespacedPodStatus({ name: runner.name, namespace: runner.namespace, body: { status } }, MERGE_PATCH);
      this.#writtenStatus.set(runner.uid, text);
      return ready;
    } catch (error) {
      if (!isNotFound(error)) throw error;
      return false;
    }
  }

  /** Creates and deletes its pods as the rollout plans and publishes its status; returns the API server's refusal of a pod. */
  async #syncDeployment(deployment: V1Deployment, pods: V1Pod[], publishedReady: ReadonlyMap<string, boolean>): Promise<string | undefined> {
    const meta = deployment.metadata!;
    const hash = templateHash(deployment.spec?.template);
    const spec = rolloutSpec(deployment);
    const owned: OwnedPod[] = pods.map((pod) => ({
      name: pod.metadata!.name!,
      templateHash: pod.metadata?.labels?.[TEMPLATE_HASH_LABEL],
      terminating: pod.metadata?.deletionTimestamp !== undefined,
      ready: publishedReady.get(pod.metadata!.uid!) ?? false,
      createdAt: new Date(pod.metadata?.creationTimestamp ?? 0).toISOString(),
    }));
    const plan = planRollout(spec, hash, owned);
    let refusal: string | undefined;
    for (let i = 0; i < plan.create && refusal === undefined; i += 1) {
      try {
        const created = await this.#core.createNamespacedPod({ namespace: meta.namespace!, body: podForDeployment(deployment, hash, this.nodeName) });
        this.log.event(`deployment ${meta.namespace}/${meta.name}: created pod ${created.metadata?.name} (template ${hash})`);
      } catch (error) {
        if (!isRefusal(error)) throw error;
        refusal = statusMessage(error);
        this.log.event(`deployment ${meta.namespace}/${meta.name}: pod refused: ${refusal}`);
      }
    }
    for (const name of plan.remove) {
      try {
        await this.#core.deleteNamespacedPod({ name, namespace: meta.namespace! });
        this.log.event(`deployment ${meta.namespace}/${meta.name}: deleted pod ${name}`);
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
    let clock = this.#deploymentClocks.get(meta.uid!);
    if (clock === undefined) this.#deploymentClocks.set(meta.uid!, (clock = new ConditionClock()));
    const status = deploymentStatus(meta.name!, meta.generation ?? 0, spec, hash, owned, clock, refusal);
    const text = JSON.stringify(status);
    if (this.#writtenStatus.get(meta.uid!) === text) return refusal;
    try {
      await this.#apps.patchNamespacedDeploymentStatus({ name: meta.name!, namespace: meta.namespace!, body: { status } }, MERGE_PATCH);
      this.#writtenStatus.set(meta.uid!, text);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    return refusal;
  }

  /** Last resort when the test process exits without stop(): no process may outlive it. */
  #killEverything(): void {
    for (const runner of this.#runners.values()) {
      for (const container of runner.containers.values()) container.kill('SIGKILL');
    }
  }
}

/** Starts a kubelet against the API server of `options.kubeConfig`; call stop() when done. */
export async function startKubelet(options: KubeletOptions): Promise<Kubelet> {
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), 'runlet-kubelet-')));
  await mkdir(workDir, { recursive: true });
  const kubelet = new Kubelet(options, workDir);
  await kubelet.start();
  return kubelet;
}
