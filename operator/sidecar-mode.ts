// Whether pods get the sidecar as a native sidecar (an init container with restartPolicy Always). That needs
// the SidecarContainers feature (beta and on from 1.29) on both sides: an API server before 1.29 drops
// restartPolicy from init containers, and a kubelet before 1.29 ignores it. Either way the sidecar becomes an
// init container that never completes and the pod hangs in `Init`. Kubelets may be older than the API server
// (a 1.29 control plane with 1.28 nodes is a normal moment of every upgrade), so `auto` asks both: the
// server's /version, and the oldest `status.nodeInfo.kubeletVersion` among the Nodes, watched, since nodes
// come and go. A kubelet version that cannot be read counts as old: the classic sidecar (a second ordinary
// container) works on every version. With no Node at all the server's version decides: no pod can start
// until a node joins, and when one does the watch decides again. `true`/`false` override it (a cluster
// whose feature gates differ). A server build that stamps no version (`v0.0.0-master`, empty major and
// minor: the test tier's Debian kube-apiserver 1.20) reads as 0.0, so it gets the classic sidecar.
// How Apps follow a change of mode is sidecar-migration.ts's business.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { isAtLeast, readServerVersion, type ServerVersion } from '../kube/server-version.ts';
import { ResourceWatch, type RestartReason } from '../kube/watch.ts';

export type NativeSidecarsSetting = 'auto' | boolean;

/** What the Node watch keeps of a Node. */
export interface NodeObject extends KubeObject {
  status?: { nodeInfo?: { kubeletVersion?: string } };
}

type Version = Pick<ServerVersion, 'major' | 'minor'>;

export function nativeSidecarsSupported(version: Version): boolean {
  return isAtLeast(version, 1, 29);
}

/** `v1.28.9-eks-036c24b` → 1.28; undefined for what does not start with a version. */
export function parseKubeletVersion(text: string | undefined): Version | undefined {
  const match = /^v?(\d+)\.(\d+)/.exec(text ?? '');
  return match === null ? undefined : { major: Number(match[1]), minor: Number(match[2]) };
}

export interface SidecarDecision {
  native: boolean;
  /** Why, for the log: the versions that decided it. */
  reason: string;
}

/** Native sidecars only when the server and every node's kubelet support them. */
export function decideFromVersions(server: ServerVersion, nodes: readonly NodeObject[]): SidecarDecision {
  if (!nativeSidecarsSupported(server)) return { native: false, reason: `the API server reports ${server.gitVersion || `${server.major}.${server.minor}`}, before 1.29` };
  const old = nodes.filter((node) => {
    const version = parseKubeletVersion(node.status?.nodeInfo?.kubeletVersion);
    return version === undefined || !nativeSidecarsSupported(version);
  });
  if (old.length > 0) {
    const named = old.slice(0, 3).map((node) => `${node.metadata?.name} (kubelet ${JSON.stringify(node.status?.nodeInfo?.kubeletVersion ?? '')})`);
    return { native: false, reason: `${old.length} of ${nodes.length} nodes run a kubelet before 1.29 or of no readable version: ${named.join(', ')}${old.length > 3 ? ', …' : ''}` };
  }
  return {
    native: true,
    reason: nodes.length === 0 ? `the API server reports ${server.gitVersion} and no node is registered yet` : `the API server and all ${nodes.length} kubelets are 1.29 or later`,
  };
}

const RETRY = { initialMs: 500, maxMs: 30_000 };

export interface SidecarModeOptions {
  setting: NativeSidecarsSetting;
  api: KubeApi;
  logger: Logger;
  watchdogMs: number;
  onWatchRestart?(reason: RestartReason): void;
  /** The decision changed after the first one (a node joined or left, or was upgraded). */
  onChange(native: boolean): void;
}

/** The sidecar mode the cluster supports now: the setting, or for `auto` the server's and the nodes' answer. */
export class SidecarMode {
  readonly #options: SidecarModeOptions;
  readonly #nodes: ResourceWatch<NodeObject> | undefined;
  readonly #stopping = new AbortController();
  #server: ServerVersion | undefined;
  #decision: SidecarDecision | undefined;
  #decided: () => void = () => {};
  readonly #whenDecided = new Promise<void>((resolve) => (this.#decided = resolve));

  constructor(options: SidecarModeOptions) {
    this.#options = options;
    if (options.setting !== 'auto') {
      this.#decision = { native: options.setting, reason: `nativeSidecars: ${options.setting}` };
      this.#decided();
      return;
    }
    this.#nodes = new ResourceWatch<NodeObject>({
      api: options.api,
      logger: options.logger,
      watchdogMs: options.watchdogMs,
      name: 'nodes',
      path: KubePath.of({ version: 'v1', resource: 'nodes' }),
      onRestart: options.onWatchRestart,
      // The kubelet's version is all that matters of a Node (and the resourceVersion, which tells the watch an
      // update from a repeat).
      transform: (node) => ({
        metadata: { name: node.metadata?.name, resourceVersion: node.metadata?.resourceVersion },
        status: { nodeInfo: { kubeletVersion: node.status?.nodeInfo?.kubeletVersion } },
      }),
      handlers: {
        // Most Node updates are status heartbeats: only a new node or a new kubelet version can change the mode.
        onUpsert: (node, previous) => {
          if (previous === undefined || previous.status?.nodeInfo?.kubeletVersion !== node.status?.nodeInfo?.kubeletVersion) this.#decide();
        },
        onDelete: () => this.#decide(),
      },
    });
  }

  /** Native sidecars or classic; only meaningful once whenDecided() has resolved. */
  get native(): boolean {
    return this.#decision?.native ?? false;
  }

  /**
   * Resolves once the mode is known: at once for a setting, for `auto` once the server's version is read and
   * the Nodes listed. An unreadable `/version` is retried with backoff: guessing would render pods that hang
   * on one side or lose the sidecar's ordering on the other, and two replicas guessing differently would
   * move Apps back and forth at each handover.
   */
  whenDecided(): Promise<void> {
    return this.#whenDecided;
  }

  start(): void {
    if (this.#nodes === undefined) return;
    this.#nodes.start();
    this.#readServerVersion().then(
      async (version) => {
        this.#server = version;
        await this.#nodes?.whenSynced();
        this.#decide();
      },
      // Rejects only when stop() aborted the wait: there is nothing left to decide.
      () => {},
    );
  }

  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#nodes?.stop();
  }

  #decide(): void {
    if (this.#server === undefined || this.#nodes === undefined || !this.#nodes.synced) return;
    const first = this.#decision === undefined;
    const next = decideFromVersions(this.#server, this.#nodes.list());
    const changed = !first && next.native !== this.#decision!.native;
    this.#decision = next;
    if (!first && !changed) return;
    this.#options.logger.info({ nativeSidecars: next.native, reason: next.reason }, next.native ? 'native sidecars: the cluster supports them' : 'classic sidecars');
    if (first) this.#decided();
    else this.#options.onChange(next.native);
  }

  async #readServerVersion(): Promise<ServerVersion> {
    for (let delayMs = RETRY.initialMs; ; delayMs = Math.min(RETRY.maxMs, delayMs * 2)) {
      try {
        return await readServerVersion(this.#options.api);
      } catch (error) {
        this.#options.logger.warn({ err: error, retryInMs: delayMs }, 'cannot read the API server version (to choose native or classic sidecars); retrying');
      }
      await sleep(delayMs, undefined, { signal: this.#stopping.signal });
    }
  }
}
