// A running pod's status as the Pod API shows it. Every key the kubelet owns is always present, so a merge
// patch of this object replaces the previous status completely.
import type { V1Container } from '@kubernetes/client-node';
import type { ConditionClock, ConditionStatus } from './conditions.ts';
import type { ContainerRunner, ContainerStateView } from './container-runner.ts';
import { LOCAL_IP } from './env.ts';
import type { PodSetupError } from './setup-error.ts';

export interface ContainerStatusView {
  name: string;
  image: string;
  imageID: string;
  containerID?: string;
  ready: boolean;
  started: boolean;
  restartCount: number;
  state: ContainerStateView;
  lastState: ContainerStateView;
}

export interface PodConditionView {
  type: string;
  status: ConditionStatus;
  reason?: string;
  message?: string;
  lastTransitionTime: string;
}

export interface PodStatusView {
  phase: 'Pending' | 'Running';
  conditions: PodConditionView[];
  hostIP: string;
  hostIPs: { ip: string }[];
  podIP: string;
  podIPs: { ip: string }[];
  startTime: string;
  initContainerStatuses: ContainerStatusView[];
  containerStatuses: ContainerStatusView[];
}

export interface PodStatusInput {
  initContainers: readonly V1Container[];
  containers: readonly V1Container[];
  /** Runners by container name, once the pod was set up. */
  runners: ReadonlyMap<string, ContainerRunner>;
  setupError: PodSetupError | undefined;
  initialized: boolean;
  mainStarted: boolean;
  terminating: boolean;
  startTime: string;
  /** The pod's address in the Pod API (pod-network.ts); its processes listen on LOCAL_IP. */
  podIP: string;
}

function containerStatus(spec: V1Container, runner: ContainerRunner | undefined, setupError: PodSetupError | undefined): ContainerStatusView {
  if (runner === undefined) {
    // A pull failure is its container's: the others wait for the pod to be created, as a kubelet shows them.
    const own = setupError?.pull === undefined || setupError.pull.container === spec.name ? setupError : undefined;
    const waiting: ContainerStateView['waiting'] = { reason: own?.reason ?? (setupError === undefined ? 'PodInitializing' : 'ContainerCreating') };
    if (own !== undefined) waiting.message = own.message;
    return { name: spec.name, image: spec.image ?? '', imageID: '', ready: false, started: false, restartCount: 0, state: { waiting }, lastState: {} };
  }
  const view: ContainerStatusView = {
    name: runner.name,
    image: runner.image,
    imageID: '',
    ready: runner.ready,
    started: runner.started,
    restartCount: runner.restartCount,
    state: runner.state,
    lastState: runner.lastState,
  };
  if (runner.containerID !== undefined) view.containerID = runner.containerID;
  return view;
}

function podCondition(clock: ConditionClock, type: string, holds: boolean, reasonWhenNot?: string): PodConditionView {
  const { lastUpdateTime: _pods_have_no_update_time, ...condition } = clock.condition(type, holds ? 'True' : 'False', holds ? undefined : reasonWhenNot);
  return condition;
}

/** Every main container and native sidecar is ready, and the pod is neither initializing nor terminating. */
function podReady(input: PodStatusInput): boolean {
  if (input.terminating || !input.initialized) return false;
  const sidecarsReady = input.initContainers.every(
    (spec) => spec.restartPolicy !== 'Always' || input.runners.get(spec.name)?.ready === true,
  );
  return sidecarsReady && input.containers.every((spec) => input.runners.get(spec.name)?.ready === true);
}

export function podStatus(input: PodStatusInput, clock: ConditionClock): PodStatusView {
  const initContainerStatuses = input.initContainers.map((spec) => containerStatus(spec, input.runners.get(spec.name), input.setupError));
  const containerStatuses = input.containers.map((spec) => containerStatus(spec, input.runners.get(spec.name), input.setupError));
  const containersReady = podReady(input);
  return {
    phase: input.mainStarted ? 'Running' : 'Pending',
    conditions: [
      podCondition(clock, 'PodScheduled', true),
      podCondition(clock, 'Initialized', input.initialized, 'ContainersNotInitialized'),
      podCondition(clock, 'ContainersReady', containersReady, 'ContainersNotReady'),
      podCondition(clock, 'Ready', containersReady, 'ContainersNotReady'),
    ],
    hostIP: LOCAL_IP,
    hostIPs: [{ ip: LOCAL_IP }],
    podIP: input.podIP,
    podIPs: [{ ip: input.podIP }],
    startTime: input.startTime,
    initContainerStatuses,
    containerStatuses,
  };
}
