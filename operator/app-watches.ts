// The watches of what an App is made of, each keeping a cache the reconcile and the RunLog upkeep read without
// I/O, and each telling the operator which App an event concerns:
//   App spec changed or new             ─▶ reconcile it        App deleted ─▶ forget it
//   its Deployment's rollout changed    ─▶ reconcile the App   (so App.status follows)
//   its code ConfigMap changed          ─▶ reconcile the Apps using it (a rollout)
//   its Pods come and go                ─▶ the RunLog janitor (runs of gone pods)
//   its Service deleted by someone else ─▶ reconcile the App (applied again at once, not at the next resync)
//   its Ingress deleted or its spec edited ─▶ reconcile the App (the same)
//   the namespace's sidecar ServiceAccount or RoleBinding deleted or drifted ─▶ sidecarRbacChanged
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { APP_LABEL, APP_PLURAL, RUNLET_GROUP, RUNLET_VERSION } from '../crds/api-group.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { replicasOwners } from './autoscaling/replicas-owner.ts';
import type { OperatorMetrics } from './metrics.ts';
import type { V1PodStatus } from '@kubernetes/client-node';
import { imagePullFailureOf } from './image-pull.ts';
import { MANAGED_SELECTOR, owningAppName } from './render/labels.ts';
import { SIDECAR_RBAC_SELECTOR } from './render/rbac.ts';
import { ENROLMENT_SELECTOR } from './namespace-enrolment.ts';
import type { DeploymentStatusView, DeploymentView } from './rollout-state.ts';
import { nativeSidecarOf, podTemplateDigestOf } from './render/deployment.ts';
import type { SidecarModeView } from './sidecar-migration.ts';
import type { PodObject } from './runlog-verdict.ts';
import { containerRestarts } from './container-restarts.ts';
import { ResourceWatch, metadataOnly, objectKey } from '../kube/watch.ts';

/** `nativeSidecar`: the sidecar mode it has and `podTemplate` the digest of its template (sidecar-migration.ts). */
export type DeploymentObject = KubeObject & DeploymentView & SidecarModeView & { podTemplate?: string };

export interface AppWatchesOptions {
  api: KubeApi;
  logger: Logger;
  watchdogMs: number;
  metrics: OperatorMetrics;
  /** An App (by namespace and name) needs a reconcile. */
  reconcileSoon(namespace: string | undefined, name: string | undefined): void;
  /** An App is gone: `key` is its `namespace/name`. */
  appDeleted(key: string): void;
  /** A pod of an App changed, or (`gone`) was deleted. */
  /** `previous`: the pod as the cache last held it, for an update. */
  podChanged(pod: PodObject, gone: boolean, previous?: PodObject): void;
  /** The sidecar ServiceAccount or RoleBinding of a namespace changed (not when first listed), or (`gone`) was deleted. */
  sidecarRbacChanged(kind: 'ServiceAccount' | 'RoleBinding', object: KubeObject, gone: boolean): void;
  /** A RoleBinding enrolling a namespace as an App namespace appeared (namespace-enrolment.ts). */
  namespaceEnrolled(namespace: string): void;
}

/** What the drift check of the sidecar RoleBinding reads: its metadata, role and subjects. */
export interface RoleBindingObject extends KubeObject {
  roleRef?: unknown;
  subjects?: unknown;
}

export interface AppWatches {
  readonly apps: ResourceWatch<App & KubeObject>;
  readonly deployments: ResourceWatch<DeploymentObject>;
  readonly codeConfigMaps: ResourceWatch<KubeObject>;
  readonly pods: ResourceWatch<PodObject>;
  readonly services: ResourceWatch<KubeObject>;
  readonly ingresses: ResourceWatch<KubeObject>;
  readonly sidecarServiceAccounts: ResourceWatch<KubeObject>;
  readonly sidecarRoleBindings: ResourceWatch<RoleBindingObject>;
  readonly enrolments: ResourceWatch<KubeObject>;
  readonly all: readonly ResourceWatch<KubeObject>[];
}

export function watchAppObjects(options: AppWatchesOptions): AppWatches {
  const { api, logger, watchdogMs, metrics, reconcileSoon } = options;
  const common = { api, logger, watchdogMs };

  const apps = new ResourceWatch<App & KubeObject>({
    ...common,
    name: 'apps',
    path: KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, resource: APP_PLURAL }),
    onRestart: (reason) => metrics.watchRestarted('apps', reason),
    handlers: {
      // Status writes (ours) leave the generation alone: only spec changes and new Apps need a reconcile.
      onUpsert: (app, previous) => {
        if (previous?.metadata.generation !== app.metadata.generation) reconcileSoon(app.metadata.namespace, app.metadata.name);
      },
      onDelete: (app) => options.appDeleted(objectKey(app.metadata.namespace, app.metadata.name)),
    },
  });
  const deployments = new ResourceWatch<DeploymentObject>({
    ...common,
    name: 'deployments',
    path: KubePath.of({ group: 'apps', version: 'v1', resource: 'deployments' }),
    labelSelector: MANAGED_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('deployments', reason),
    // Which App owns it, its size and who sets it (the autoscaler: autoscaling/replicas-owner.ts), how its
    // rollout stands, its sidecar mode and template digest: not the pod template.
    transform: (deployment) => {
      const identity = metadataOnly(deployment);
      return {
        ...identity,
        metadata: { ...identity.metadata, managedFields: replicasOwners(deployment) },
        spec: { replicas: deployment.spec?.replicas },
        status: rolloutStatus(deployment.status),
        nativeSidecar: nativeSidecarOf(deployment as Parameters<typeof nativeSidecarOf>[0]),
        podTemplate: podTemplateDigestOf(deployment),
      };
    },
    handlers: {
      onUpsert: (deployment, previous) => {
        if (deploymentEventMatters(deployment, previous)) reconcileSoon(deployment.metadata?.namespace, owningAppName(deployment));
      },
      onDelete: (deployment) => reconcileSoon(deployment.metadata?.namespace, owningAppName(deployment)),
    },
  });
  // Code ConfigMaps labelled runlet.dev/app roll out as soon as they change; others at the next resync.
  const codeConfigMaps = new ResourceWatch<KubeObject>({
    ...common,
    name: 'configmaps',
    path: KubePath.of({ version: 'v1', resource: 'configmaps' }),
    labelSelector: APP_LABEL,
    onRestart: (reason) => metrics.watchRestarted('configmaps', reason),
    // That it changed is all that matters here: the reconcile reads the code itself.
    transform: metadataOnly,
    handlers: { onUpsert: (configMap) => reconcileUsersOf(configMap), onDelete: (configMap) => reconcileUsersOf(configMap) },
  });
  // Whether a pod exists, whether it has ended or is ending, and whether it is ready (its load counts; an App at
  // zero lists it in its Endpoints); its IP (where the autoscaler scrapes its load, and a cancel reaches its
  // runs); an image its kubelet cannot pull, and its containers' restarts, for the App's status.
  const pods: ResourceWatch<PodObject> = new ResourceWatch<PodObject>({
    ...common,
    name: 'pods',
    path: KubePath.of({ version: 'v1', resource: 'pods' }),
    labelSelector: APP_LABEL,
    onRestart: (reason) => metrics.watchRestarted('pods', reason),
    transform: (pod): PodObject => {
      const identity = metadataOnly(pod);
      return {
        ...identity,
        metadata: { ...identity.metadata, deletionTimestamp: pod.metadata?.deletionTimestamp },
        status: {
          phase: pod.status?.phase,
          podIP: pod.status?.podIP,
          conditions: pod.status?.conditions?.filter((condition) => condition.type === 'Ready'),
          // The raw pod, whatever the cache's type says: the API server's container statuses.
          containerStatuses: containerRestarts(pod.status?.containerStatuses),
        },
        imagePull: imagePullFailureOf((pod as { status?: V1PodStatus }).status, pods.get(pod.metadata?.namespace, pod.metadata?.name ?? '')?.imagePull),
      };
    },
    handlers: { onUpsert: (pod, previous) => options.podChanged(pod, false, previous), onDelete: (pod) => options.podChanged(pod, true) },
  });
  const services = new ResourceWatch<KubeObject>({
    ...common,
    name: 'services',
    path: KubePath.of({ version: 'v1', resource: 'services' }),
    labelSelector: MANAGED_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('services', reason),
    transform: metadataOnly,
    handlers: { onDelete: (service) => reconcileSoon(service.metadata?.namespace, owningAppName(service)) },
  });
  // Generation changes are spec edits (someone else's, or an apply of ours that changed it: then the
  // reconcile this causes applies nothing).
  const ingresses = new ResourceWatch<KubeObject>({
    ...common,
    name: 'ingresses',
    path: KubePath.of({ group: 'networking.k8s.io', version: 'v1', resource: 'ingresses' }),
    labelSelector: MANAGED_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('ingresses', reason),
    transform: metadataOnly,
    handlers: {
      onUpsert: (ingress, previous) => {
        if (previous !== undefined && previous.metadata?.generation !== ingress.metadata?.generation) reconcileSoon(ingress.metadata?.namespace, owningAppName(ingress));
      },
      onDelete: (ingress) => reconcileSoon(ingress.metadata?.namespace, owningAppName(ingress)),
    },
  });
  // Shared by the Apps of a namespace, so no one App owns them as controller: the operator decides (main.ts).
  const sidecarServiceAccounts = new ResourceWatch<KubeObject>({
    ...common,
    name: 'serviceaccounts',
    path: KubePath.of({ version: 'v1', resource: 'serviceaccounts' }),
    labelSelector: SIDECAR_RBAC_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('serviceaccounts', reason),
    transform: metadataOnly,
    handlers: {
      onUpsert: (account, previous) => {
        if (previous !== undefined) options.sidecarRbacChanged('ServiceAccount', account, false);
      },
      onDelete: (account) => options.sidecarRbacChanged('ServiceAccount', account, true),
    },
  });
  const sidecarRoleBindings = new ResourceWatch<RoleBindingObject>({
    ...common,
    name: 'rolebindings',
    path: KubePath.of({ group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'rolebindings' }),
    labelSelector: SIDECAR_RBAC_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('rolebindings', reason),
    transform: (binding) => ({ ...metadataOnly(binding), roleRef: binding.roleRef, subjects: binding.subjects }),
    handlers: {
      onUpsert: (binding, previous) => {
        if (previous !== undefined) options.sidecarRbacChanged('RoleBinding', binding, false);
      },
      onDelete: (binding) => options.sidecarRbacChanged('RoleBinding', binding, true),
    },
  });

  // An App of a namespace that was not enrolled waits out a backoff: its enrolment brings it forward.
  const enrolments = new ResourceWatch<KubeObject>({
    ...common,
    name: 'enrolments',
    path: KubePath.of({ group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'rolebindings' }),
    labelSelector: ENROLMENT_SELECTOR,
    onRestart: (reason) => metrics.watchRestarted('enrolments', reason),
    transform: metadataOnly,
    handlers: {
      onUpsert: (binding, previous) => {
        const namespace = binding.metadata?.namespace;
        if (previous === undefined && namespace !== undefined) options.namespaceEnrolled(namespace);
      },
    },
  });

  /**
   * A Deployment event matters when someone edited it (a new generation) or its rollout moved; a Deployment
   * first seen, when it shows replicas the App's status does not (not the one a reconcile just created: its
   * status is in the App's).
   */
  function deploymentEventMatters(deployment: DeploymentObject, previous: DeploymentObject | undefined): boolean {
    if (previous !== undefined) {
      return previous.metadata?.generation !== deployment.metadata?.generation || !isDeepStrictEqual(previous.spec, deployment.spec) || !isDeepStrictEqual(previous.status, deployment.status);
    }
    const namespace = deployment.metadata?.namespace;
    const appName = owningAppName(deployment);
    const app = namespace === undefined || appName === undefined ? undefined : apps.get(namespace, appName);
    const shown = app?.status ?? {};
    const actual = deployment.status ?? {};
    return app === undefined || (actual.replicas ?? 0) !== (shown.replicas ?? 0) || (actual.readyReplicas ?? 0) !== (shown.readyReplicas ?? 0);
  }

  function reconcileUsersOf(configMap: KubeObject): void {
    for (const app of apps.list()) {
      if (app.metadata.namespace === configMap.metadata?.namespace && app.spec?.runtime?.python?.code?.configMap?.name === configMap.metadata?.name) {
        reconcileSoon(app.metadata.namespace, app.metadata.name);
      }
    }
  }

  return {
    apps,
    deployments,
    codeConfigMaps,
    pods,
    services,
    ingresses,
    sidecarServiceAccounts,
    sidecarRoleBindings,
    enrolments,
    all: [apps, deployments, codeConfigMaps, pods, services, ingresses, sidecarServiceAccounts, sidecarRoleBindings, enrolments],
  };
}

/** The rollout's counts and conditions, without the timestamps that move when nothing else does. */
function rolloutStatus(status: DeploymentStatusView | undefined): DeploymentStatusView {
  const { observedGeneration, replicas, updatedReplicas, readyReplicas, availableReplicas, conditions } = status ?? {};
  return {
    observedGeneration,
    replicas,
    updatedReplicas,
    readyReplicas,
    availableReplicas,
    conditions: conditions?.map(({ type, status: conditionStatus, reason, message }) => ({ type, status: conditionStatus, reason, message })),
  };
}
