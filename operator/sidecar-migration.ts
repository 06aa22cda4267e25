// How Apps follow a change of sidecar mode (sidecar-mode.ts): one at a time. The mode is part of every App's
// pod template, so applying a new one to all Apps at once would replace every pod of the cluster together —
// a node pool of old kubelets joining, or the last one leaving at the end of an upgrade, would become a
// cluster-wide restart, every cold start paid at the same moment. So an App keeps the mode its Deployment
// already has, and takes the new one only
// - when it has no Deployment yet, or no pod (at zero, or minReplicas 0 with none running): nothing to replace;
// - when its pod template changes anyway (new code, an edited spec): the pods are replaced in any case, and
//   moving with that rollout costs nothing more;
// - when it is the one App moving: the next one moves once that one's rollout has finished, or stalled (a
//   rollout stuck for reasons of its own must not hold every other App back), or the App is gone.
// Which App is moving is this replica's memory: after a leader handover the new leader picks one again, so
// for a moment two may move. The leader's periodic resync reconciles every App, which also wakes any App
// left waiting here.
import { objectKey } from '../kube/watch.ts';
import { rolloutState, type DeploymentView } from './rollout-state.ts';

/** What the Deployment watch keeps of an App's Deployment: its rollout, and the mode its template has. */
export interface SidecarModeView extends DeploymentView {
  /** Undefined when the template has no sidecar container (not ours, or not rendered yet). */
  nativeSidecar?: boolean;
}

/** What else the reconcile knows of the App's next apply. */
export interface PendingApply {
  /** Its pod template changes anyway (code, spec, configuration): its pods are replaced whatever the mode. */
  replacedAnyway: boolean;
}

export interface SidecarMigrationOptions {
  /** The mode the cluster supports now (SidecarMode.native). */
  native(): boolean;
  /** Reconcile this App soon: it may move now. */
  reconcileSoon(namespace: string, name: string): void;
}

export class SidecarMigration {
  readonly #options: SidecarMigrationOptions;
  /** `namespace/name` of the App moving now. */
  #moving: string | undefined;
  /** Apps that wanted to move while another one was; in the order they asked. */
  readonly #waiting = new Map<string, { namespace: string; name: string }>();

  constructor(options: SidecarMigrationOptions) {
    this.#options = options;
  }

  /** Whether to render this App with native sidecars, given its live Deployment. */
  modeFor(namespace: string, name: string, live: SidecarModeView | undefined, pending: PendingApply = { replacedAnyway: false }): boolean {
    const key = objectKey(namespace, name);
    const wanted = this.#options.native();
    if (this.#moving === key && (live === undefined || (live.nativeSidecar === wanted && rolloutEnded(live)))) this.#release();
    if (live?.nativeSidecar === undefined || live.nativeSidecar === wanted || hasNoPods(live) || pending.replacedAnyway) {
      this.#stopWaiting(key);
      return wanted;
    }
    if (this.#moving === undefined || this.#moving === key) {
      this.#waiting.delete(key);
      this.#moving = key;
      return wanted;
    }
    if (!this.#waiting.has(key)) this.#waiting.set(key, { namespace, name });
    return live.nativeSidecar;
  }

  /** The App is gone: it neither moves nor waits. */
  forget(namespace: string, name: string): void {
    const key = objectKey(namespace, name);
    if (this.#moving === key) this.#release();
    this.#stopWaiting(key);
  }

  /** The App moving now, if any: for logs and tests. */
  get moving(): string | undefined {
    return this.#moving;
  }

  #release(): void {
    this.#moving = undefined;
    this.#wakeNext();
  }

  #stopWaiting(key: string): void {
    if (this.#waiting.delete(key)) this.#wakeNext();
  }

  /** Lets the App that has waited longest move, when none is moving; its reconcile takes the turn. */
  #wakeNext(): void {
    if (this.#moving !== undefined) return;
    const next = this.#waiting.values().next();
    if (next.done === true) return;
    this.#options.reconcileSoon(next.value.namespace, next.value.name);
  }
}

function rolloutEnded(live: SidecarModeView): boolean {
  const state = rolloutState(live);
  return (state.rolledOut && state.availableReplicas >= state.desiredReplicas) || state.stalled !== undefined || state.refusal !== undefined;
}

function hasNoPods(live: SidecarModeView): boolean {
  const state = rolloutState(live);
  return state.desiredReplicas === 0 && state.replicas === 0;
}
