// Reconciling one App: read it (from the watch cache), check it, render its children, apply them, and
// write what happened into its status. What the children look like is render/'s business; how often this
// runs and what happens when it throws is the work queue's.
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { applyAppDefaults, validateApp } from '../crds/validate.ts';
import { appEvents } from './app-events.ts';
import { nextAppStatus, ownedStatusDiffers, type Observation } from './app-status.ts';
import { autoscales, replicasToApply, takeReplicas, type ScaledDeployment } from './autoscaling/replicas-owner.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { RenderConfig } from './config.ts';
import type { KubeApi } from '../kube/client.ts';
import { isNamespaceTerminating, isNotFound } from '../kube/errors.ts';
import { NamespaceNotEnrolledError, isRbacForbidden } from './namespace-enrolment.ts';
import { refOf, resourcePath, type KubeObject, type ObjectRef } from '../kube/objects.ts';
import { renderAppChildren } from './render/app-children.ts';
import { codeHash, type CodeConfigMap } from './render/code-hash.ts';
import { owningAppName } from './render/labels.ts';
import { appUrl, childName } from './render/names.ts';
import type { DeploymentView } from './rollout-state.ts';
import { APP_LABEL } from '../crds/api-group.ts';
import type { PodImagePullFailure } from './image-pull.ts';
import { podRuns, type PodObject } from './runlog-verdict.ts';
import type { SidecarRbacApplier } from './sidecar-rbac.ts';
import type { PendingApply, SidecarModeView } from './sidecar-migration.ts';
import { podTemplateDigestOf, renderDeployment } from './render/deployment.ts';
import { scalesToZero } from './autoscaling/endpoints.ts';

export interface ReconcilerDeps {
  api: KubeApi;
  /** The sidecar mode is each App's own: `sidecars` chooses it. */
  config: Omit<RenderConfig, 'nativeSidecars'>;
  /** Which sidecar mode an App renders now (sidecar-migration.ts), and forgetting a deleted App. */
  sidecars: { modeFor(namespace: string, name: string, live: SidecarModeView | undefined, pending: PendingApply): boolean; forget(namespace: string, name: string): void };
  /** The App watch's cache. */
  apps: { get(namespace: string, name: string): App | undefined };
  rbac: SidecarRbacApplier;
  /** The Deployment watch's cache: who owns `spec.replicas` now, its sidecar mode and its pod template's digest. */
  deployments: { get(namespace: string, name: string): (ScaledDeployment & SidecarModeView & { podTemplate?: string }) | undefined };
  /** Applies as the autoscaler's field manager: hands `spec.replicas` of autoscaled Apps over to it. */
  autoscalerApi: KubeApi;
  /** Events on the App: failures, and when it starts or stops serving. */
  events: EventRecorder;
  /** The Pod watch's cache: a pod of the App whose image cannot be pulled shows in its status. */
  pods?: { list(): PodObject[] };
  /** Points the Endpoints of an App that scales to zero at its ready pods or the holder (autoscaling/endpoints-switch.ts). */
  switchEndpoints?: (app: App) => Promise<unknown>;
  logger: Logger;
  now?: () => Date;
}

/**
 * `reconciled`: children applied; `invalid`: spec refused, status says why; `gone`: nothing to do (the App, or
 * its namespace, is being deleted). Throws to be retried.
 */
export type ReconcileResult = 'reconciled' | 'invalid' | 'gone';

export function createReconciler(deps: ReconcilerDeps): (namespace: string, name: string) => Promise<ReconcileResult> {
  const { api, config, logger } = deps;
  const now = deps.now ?? (() => new Date());
  /** `<uid>/<kind>` of stale children already removed: looked for once per App, not on every reconcile. */
  const pruned = new Set<string>();

  async function writeStatus(app: App, observation: Observation): Promise<void> {
    const next = nextAppStatus(app, observation, appUrl(app, config.ingress), now());
    for (const note of appEvents(app.status, next)) deps.events.record(app, note);
    if (!ownedStatusDiffers(app.status, next)) return;
    const path = resourcePath({ apiVersion: app.apiVersion, kind: app.kind, namespace: app.metadata.namespace, name: app.metadata.name }, 'status');
    try {
      await api.mergePatch(path, { status: next });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  /** The code ConfigMap's digest, or its name when it does not exist (yet). */
  async function readCode(app: App): Promise<{ hash?: string; missing?: string }> {
    const configMap = app.spec.runtime.python?.code.configMap;
    if (configMap === undefined) return {};
    const path = resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace: app.metadata.namespace, name: configMap.name });
    const found = await api.find<KubeObject & CodeConfigMap>(path);
    return found === undefined ? { missing: configMap.name } : { hash: codeHash(found) };
  }

  async function applyAll(children: KubeObject[]): Promise<KubeObject[]> {
    const results = await Promise.allSettled(children.map((child) => api.apply(child)));
    const rejected = results.flatMap((result, i) => (result.status === 'rejected' ? [{ child: children[i]!, reason: result.reason as Error }] : []));
    // Refused because the namespace is going: the caller gives up quietly rather than retry and report.
    if (rejected.length > 0 && rejected.every(({ reason }) => isNamespaceTerminating(reason))) throw rejected[0]!.reason;
    // Refused by RBAC: the namespace is not an App namespace, which the caller reports as such.
    const forbidden = rejected.find(({ reason }) => isRbacForbidden(reason));
    if (forbidden !== undefined) throw forbidden.reason;
    const failures = rejected.map(({ child, reason }) => `applying ${child.kind} "${child.metadata?.name}": ${reason.message}`);
    if (failures.length > 0) throw new Error(failures.join('; '));
    return results.map((result) => (result as PromiseFulfilledResult<KubeObject>).value);
  }

  /** Deletes a child the configuration no longer wants — only if this App controls it. */
  async function removeStale(app: App, ref: ObjectRef): Promise<void> {
    const memo = `${app.metadata.uid}/${ref.kind}`;
    if (pruned.has(memo)) return;
    const path = resourcePath(ref);
    const child = await api.find(path);
    const uid = child?.metadata?.uid;
    if (child !== undefined && uid !== undefined && owningAppName(child) === app.metadata.name && child.metadata?.ownerReferences?.some((owner) => owner.uid === app.metadata.uid)) {
      await api.delete(path, { uid }).catch((error: unknown) => {
        if (!isNotFound(error)) throw error;
      });
      logger.info({ app: `${ref.namespace}/${app.metadata.name}`, child: `${ref.kind}/${ref.name}` }, 'removed a child the configuration no longer wants');
    }
    pruned.add(memo);
  }

  return async function reconcile(namespace: string, name: string): Promise<ReconcileResult> {
    const stored = deps.apps.get(namespace, name);
    // Deleted: the API server's garbage collector removes the children through their owner references.
    if (stored === undefined || stored.metadata.deletionTimestamp !== undefined) {
      deps.sidecars.forget(namespace, name);
      return 'gone';
    }

    // The API server may not enforce the CRD schema (older clusters, the test server): check it here. Status is ours to rewrite.
    const problems = validateApp({ ...stored, status: undefined }).map((issue) => issue.message);
    if (problems.length > 0) {
      await writeStatus(stored, { kind: 'invalid', problems });
      return 'invalid';
    }
    const app = applyAppDefaults(stored) as App;
    try {
      const code = await readCode(app);
      await deps.rbac.ensure(namespace);
      const live = deps.deployments.get(namespace, childName(app));
      const replicas = replicasToApply(app.spec.scaling, live);
      const pod = { codeHash: code.hash };
      // In the mode it has, would the App's pod template change? Then it may change mode with that rollout.
      const kept = live?.nativeSidecar;
      const replacedAnyway =
        kept !== undefined && live?.podTemplate !== undefined && podTemplateDigestOf(renderDeployment(app, { ...config, nativeSidecars: kept }, pod, replicas)) !== live.podTemplate;
      const nativeSidecars = deps.sidecars.modeFor(namespace, name, live, { replacedAnyway });
      const children = renderAppChildren(app, { ...config, nativeSidecars }, pod, replicas);
      const applied = await applyAll(children.apply);
      for (const ref of children.remove) await removeStale(app, ref);
      if (scalesToZero(app)) await deps.switchEndpoints?.(app);
      const deployment = applied.find((child) => child.kind === 'Deployment') as (ScaledDeployment & DeploymentView) | undefined;
      if (deployment !== undefined && autoscales(app.spec.scaling)) await takeReplicas(deps.autoscalerApi, deployment);
      await writeStatus(app, {
        kind: 'applied',
        children: applied.map((child) => refOf(child).kind),
        deployment,
        missingCodeConfigMap: code.missing,
        imagePull: imagePullFailureIn(deps.pods?.list() ?? [], namespace, name),
      });
      return 'reconciled';
    } catch (error) {
      if (isNamespaceTerminating(error)) {
        logger.debug({ app: `${namespace}/${name}` }, 'the namespace is being deleted: nothing to apply');
        return 'gone';
      }
      if (isRbacForbidden(error)) {
        // Not an App namespace: said in the status (and a Warning Event), retried with the queue's backoff and at
        // once when the namespace is enrolled (app-watches.ts), never as a tight loop of refused writes.
        const notEnrolled = new NamespaceNotEnrolledError(namespace, error);
        await writeStatus(app, { kind: 'not-enrolled', message: notEnrolled.message }).catch((statusError: unknown) =>
          logger.warn({ app: `${namespace}/${name}`, err: statusError }, 'could not record in the App status that its namespace is not enrolled'),
        );
        throw notEnrolled;
      }
      await writeStatus(app, { kind: 'apply-failed', message: (error as Error).message }).catch((statusError: unknown) =>
        logger.warn({ app: `${namespace}/${name}`, err: statusError }, 'could not record the failure in the App status'),
      );
      throw error;
    }
  };
}

/** The first pod of the App (running, not ending) whose image cannot be pulled, by name for a steady message. */
function imagePullFailureIn(pods: PodObject[], namespace: string, appName: string): PodImagePullFailure | undefined {
  const failing = pods
    .filter((pod) => pod.metadata?.namespace === namespace && pod.metadata.labels?.[APP_LABEL] === appName && pod.metadata.deletionTimestamp === undefined && podRuns(pod) && pod.imagePull !== undefined)
    .sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  const pod = failing[0];
  return pod === undefined ? undefined : { pod: pod.metadata?.name ?? '', ...pod.imagePull! };
}
