// One pod as local processes: gives its ports free local numbers, makes its volumes directories, starts its
// init containers in order (a native sidecar — restartPolicy Always — must pass its startup probe, a plain
// one must exit 0), then its main containers; reports its status; and stops it as the kubelet would: main
// containers first (preStop hook, SIGTERM, SIGKILL after terminationGracePeriodSeconds), then the sidecars
// in reverse order.
import { join } from 'node:path';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { ObjectSource } from './cluster-objects.ts';
import { ConditionClock } from './conditions.ts';
import { ContainerRunner, type ContainerRole, type ContainerSetup, type ProbeSpec } from './container-runner.ts';
import { localImage, type ImageTable } from './images.ts';
import type { InClusterApi } from './in-cluster.ts';
import { containerLaunch, type LaunchContext } from './launch.ts';
import { LogFile } from './log-file.ts';
import { podStatus, type PodStatusInput, type PodStatusView } from './pod-status.ts';
import { allocatePort, releasePorts } from './ports.ts';
import { handlerPorts, hookAction, probeAction, type HookRequests } from './probe-action.ts';
import { portFlagValues } from './rewrite.ts';
import { PodSetupError } from './setup-error.ts';
import type { KubeletTiming } from './timing.ts';
import { materializeVolumes, type VolumeContext } from './volumes.ts';

/** Kubernetes gives sidecars at least this long to stop once the main containers are gone, even past the grace period. */
const SIDECAR_MIN_GRACE_MS = 2_000;
const DEFAULT_GRACE_SECONDS = 30;

export interface PodRunnerOptions {
  pod: V1Pod;
  images: ImageTable;
  source: ObjectSource;
  serviceAccountToken: VolumeContext['serviceAccountToken'];
  /** Set on a real control plane (launch.ts). */
  inClusterApi: InClusterApi | undefined;
  /** How its httpGet hooks are asked (kubelet.ts). */
  hookRequests: HookRequests;
  timing: KubeletTiming;
  /** This pod's own directory (volumes live under it). */
  dir: string;
  /** Its address in the Pod API (pod-network.ts). */
  podIP: string;
  logPath: string;
  /** Called whenever the pod's status may have changed. */
  onChange: () => void;
}

function roleOf(container: V1Container, init: boolean): ContainerRole {
  if (!init) return 'main';
  return container.restartPolicy === 'Always' ? 'sidecar' : 'init';
}

/** Every port number the pod's spec names: declared ports, probe and hook ports, port flags and PORT variables. */
function podPorts(pod: V1Pod, images: ImageTable): Set<number> {
  const ports = new Set<number>();
  for (const container of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const port of container.ports ?? []) ports.add(port.containerPort);
    const handlers = [container.startupProbe, container.readinessProbe, container.livenessProbe, container.lifecycle?.preStop, container.lifecycle?.postStart];
    for (const handler of handlers) for (const port of handlerPorts(handler, container)) ports.add(port);
    let entrypoint: readonly string[] = [];
    try {
      entrypoint = localImage(images, container.image).entrypoint ?? [];
    } catch {
      // an unknown image is reported when the container is set up
    }
    for (const port of portFlagValues([...(container.command ?? entrypoint), ...(container.args ?? [])])) ports.add(port);
    for (const variable of container.env ?? []) {
      if (/PORT/i.test(variable.name) && /^\d+$/.test(variable.value ?? '')) ports.add(Number(variable.value));
    }
  }
  return ports;
}

export class PodRunner {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
  readonly pod: V1Pod;
  readonly dir: string;
  /** The pod's address in the Pod API, a label for its local ports (pod-network.ts). */
  readonly podIP: string;
  readonly log: LogFile;
  /** Pod port → the local port standing for it. */
  readonly ports = new Map<number, number>();
  /** Containers by name, once the pod has been set up. */
  readonly containers = new Map<string, ContainerRunner>();
  setupError: PodSetupError | undefined;
  initialized = false;

  readonly #options: PodRunnerOptions;
  readonly #clock = new ConditionClock();
  readonly #startTime = new Date().toISOString();
  #mainStarted = false;
  #stopping: Promise<void> | undefined;
  #wakeRetry: (() => void) | undefined;
  /** The projected tokens' rotations: each written again once 80% of its lifetime has passed, as a kubelet does. */
  readonly #tokenRotations = new Set<NodeJS.Timeout>();

  constructor(options: PodRunnerOptions) {
    this.pod = options.pod;
    this.name = options.pod.metadata?.name ?? '';
    this.namespace = options.pod.metadata?.namespace ?? 'default';
    this.uid = options.pod.metadata?.uid ?? '';
    this.dir = options.dir;
    this.podIP = options.podIP;
    this.log = new LogFile(options.logPath);
    this.#options = options;
  }

  get terminating(): boolean {
    return this.#stopping !== undefined;
  }

  /** The local port standing for a pod port. */
  localPort(podPort: number): number {
    const local = this.ports.get(podPort);
    if (local === undefined) {
      throw new Error(`pod ${this.namespace}/${this.name} has no port ${podPort}; its ports: ${[...this.ports.keys()].join(', ') || 'none (not set up yet?)'}`);
    }
    return local;
  }

  /** `http://127.0.0.1:<local port>` of a pod port. */
  url(podPort: number): string {
    return `http://127.0.0.1:${this.localPort(podPort)}`;
  }

  container(name: string): ContainerRunner {
    const container = this.containers.get(name);
    if (container === undefined) {
      throw new Error(`pod ${this.namespace}/${this.name} has no container "${name}" (yet); it has: ${[...this.containers.keys()].join(', ') || 'none'}`);
    }
    return container;
  }

  /** The processes running now, by container. */
  processes(): { container: string; pid: number }[] {
    return [...this.containers.values()].flatMap((container) => (container.pid === undefined ? [] : [{ container: container.name, pid: container.pid }]));
  }

  start(): void {
    void this.#boot().catch((error: unknown) => {
      this.log.event(`pod start failed: ${(error as Error).stack ?? String(error)}`);
    });
  }

  /** Stops every container; `gracePeriodSeconds` defaults to the pod's terminationGracePeriodSeconds. */
  stop(gracePeriodSeconds?: number): Promise<void> {
    this.#stopping ??= this.#stop(gracePeriodSeconds ?? this.pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS);
    return this.#stopping;
  }

  status(): PodStatusView {
    return podStatus(this.#statusInput(), this.#clock);
  }

  #statusInput(): PodStatusInput {
    return {
      initContainers: this.pod.spec?.initContainers ?? [],
      containers: this.pod.spec?.containers ?? [],
      runners: this.containers,
      setupError: this.setupError,
      initialized: this.initialized,
      mainStarted: this.#mainStarted,
      terminating: this.terminating,
      startTime: this.#startTime,
      podIP: this.podIP,
    };
  }

  async #boot(): Promise<void> {
    this.log.event(`pod ${this.namespace}/${this.name} (uid ${this.uid}) assigned to the test kubelet`);
    if (!(await this.#setUp())) return;
    const inits = (this.pod.spec?.initContainers ?? []).map((spec) => this.containers.get(spec.name)!);
    try {
      for (const runner of inits) {
        if (this.terminating) return;
        runner.start();
        await (runner.role === 'sidecar' ? runner.whenStarted() : runner.whenCompleted());
      }
    } catch (error) {
      if (this.terminating) return; // stopped while initializing
      throw error;
    }
    if (this.terminating) return;
    this.initialized = true;
    for (const spec of this.pod.spec?.containers ?? []) this.containers.get(spec.name)!.start();
    this.#mainStarted = true;
    this.#options.onChange();
  }

  /** Sets the pod up, retrying while it cannot be (a missing ConfigMap may yet be created). False once stopped. */
  async #setUp(): Promise<boolean> {
    for (;;) {
      if (this.terminating) return false;
      try {
        const runners = await this.#prepareContainers();
        if (this.terminating) return false;
        for (const runner of runners) this.containers.set(runner.name, runner);
        this.setupError = undefined;
        this.#options.onChange();
        return true;
      } catch (error) {
        const setupError =
          error instanceof PodSetupError ? error : new PodSetupError('ContainerCreating', `setting the pod up failed: ${(error as Error).message}`);
        if (setupError.message !== this.setupError?.message) {
          this.log.event(`cannot start yet (${setupError.reason}): ${setupError.message}`);
          this.setupError = setupError;
          this.#options.onChange();
        }
        await this.#retryPause();
        if (setupError.reason === 'ErrImagePull' && !this.terminating) {
          // As a kubelet does between pulls: the pod shows the back-off, then the next pull's error.
          this.setupError = new PodSetupError('ImagePullBackOff', `Back-off pulling image "${setupError.pull?.image ?? ''}"`, setupError.pull);
          this.#options.onChange();
          await this.#retryPause();
        }
      }
    }
  }

  async #prepareContainers(): Promise<ContainerRunner[]> {
    const { pod, images, source, timing } = this.#options;
    if (this.ports.size === 0) {
      for (const port of podPorts(pod, images)) this.ports.set(port, await allocatePort());
      this.log.event(`ports (pod → local): ${[...this.ports].map(([p, l]) => `${p}→${l}`).join(', ') || 'none'}`);
    }
    const volumeDirs = await materializeVolumes(join(this.dir, 'volumes'), {
      pod,
      source,
      serviceAccountToken: this.#options.serviceAccountToken,
      tokenWritten: (token) => this.#rotateLater(token),
    });
    const context: LaunchContext = { pod, images, source, volumeDirs, ports: this.ports, podDir: this.dir };
    if (this.#options.inClusterApi !== undefined) context.inClusterApi = this.#options.inClusterApi;
    const specs = [
      ...(pod.spec?.initContainers ?? []).map((spec) => ({ spec, init: true })),
      ...(pod.spec?.containers ?? []).map((spec) => ({ spec, init: false })),
    ];
    const setups: ContainerSetup[] = [];
    for (const { spec, init } of specs) {
      const launch = await containerLaunch(spec, context);
      const probe = (which: 'startupProbe' | 'readinessProbe' | 'livenessProbe'): ProbeSpec | undefined => {
        const declared = spec[which];
        return declared === undefined ? undefined : { probe: declared, action: probeAction(declared, spec, this.ports, which) };
      };
      const setup: ContainerSetup = { name: spec.name, image: spec.image ?? '', role: roleOf(spec, init), launch };
      const [startupProbe, readinessProbe, livenessProbe] = [probe('startupProbe'), probe('readinessProbe'), probe('livenessProbe')];
      if (startupProbe !== undefined) setup.startupProbe = startupProbe;
      if (readinessProbe !== undefined) setup.readinessProbe = readinessProbe;
      if (livenessProbe !== undefined) setup.livenessProbe = livenessProbe;
      const preStop = spec.lifecycle?.preStop;
      if (preStop !== undefined) setup.preStop = hookAction(probeAction(preStop, spec, this.ports, 'preStop hook'), this.#options.hookRequests);
      setups.push(setup);
    }
    return setups.map((setup) => new ContainerRunner(setup, this.log, timing, this.#options.onChange));
  }

  #retryPause(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, this.#options.timing.retryMs);
      this.#wakeRetry = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  #rotateLater(token: { expirationSeconds: number; rewrite: () => Promise<void> }, afterMs = this.#options.timing.tokenRefreshMs ?? token.expirationSeconds * 800): void {
    if (this.#stopping !== undefined) return;
    const timer = setTimeout(() => {
      this.#tokenRotations.delete(timer);
      token.rewrite().then(
        () => this.#rotateLater(token),
        (error: unknown) => {
          // Tried again shortly, as a kubelet retries a TokenRequest: the token in place is still valid for a while.
          this.log.event(`rotating a projected token failed: ${(error as Error).message}`);
          this.#rotateLater(token, this.#options.timing.retryMs);
        },
      );
    }, afterMs);
    timer.unref();
    this.#tokenRotations.add(timer);
  }

  async #stop(gracePeriodSeconds: number): Promise<void> {
    this.#wakeRetry?.();
    for (const timer of this.#tokenRotations) clearTimeout(timer);
    this.#tokenRotations.clear();
    this.log.event(`stopping (grace period ${gracePeriodSeconds} s)`);
    this.#options.onChange();
    const deadline = performance.now() + gracePeriodSeconds * 1000;
    const runners = [...this.containers.values()];
    await Promise.all(runners.filter((r) => r.role === 'main').map((r) => r.stop(deadline, true)));
    for (const sidecar of runners.filter((r) => r.role === 'sidecar').reverse()) {
      await sidecar.stop(Math.max(deadline, performance.now() + SIDECAR_MIN_GRACE_MS), true);
    }
    await Promise.all(runners.filter((r) => r.role === 'init').map((r) => r.stop(deadline, false)));
    this.log.event('stopped: every container has exited');
    await this.log.close();
    releasePorts(this.ports.values());
  }
}
