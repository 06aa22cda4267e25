// The Deployment of an App: its pods run the app container and the sidecar, with the sidecar's RunLog
// token, a scratch directory for run records, a /tmp for each container and, for mounted code, the code
// ConfigMap at /app; as the `restricted` Pod Security Standard asks (pod-security.ts).
import { createHash } from 'node:crypto';
import type { V1Deployment, V1PodSpec, V1PodTemplateSpec, V1Volume } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import type { RenderConfig } from '../config.ts';
import { renderAppContainer } from './app-container.ts';
import { CODE_HASH_ANNOTATION, appLabels, childMetadata, selectorLabels } from './labels.ts';
import { ADMIN_KEY_SECRET } from '../../sidecar/admin-cancel.ts';
import {
  ADMIN_KEY_VOLUME,
  APP_CONTAINER,
  APP_TMP_VOLUME,
  CODE_VOLUME,
  DATA_VOLUME,
  RESULTS_TOKEN_EXPIRATION_SECONDS,
  RESULTS_TOKEN_VOLUME,
  SIDECAR_CONTAINER,
  SIDECAR_SERVICE_ACCOUNT,
  SIDECAR_TMP_VOLUME,
  SIDECAR_TOKEN_VOLUME,
  TERMINATION_MARGIN_SECONDS,
  childName,
} from './names.ts';
import { POD_SECURITY_CONTEXT } from './pod-security.ts';
import { renderSidecarContainer } from './sidecar-container.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../../results/results-token.ts';

/** What a pod template is made of besides the App and the configuration. */
export interface PodInputs {
  /**
   * Digest of the code ConfigMap's content (render/code-hash.ts), undefined when the code is baked, the runtime
   * is custom, or the ConfigMap does not exist yet.
   */
  codeHash: string | undefined;
}

/**
 * On the Deployment, not its template (writing it rolls nothing): a digest of the pod template applied, so a
 * later reconcile can tell whether the template changes anyway, e.g. to move the App to a new sidecar mode
 * with that rollout rather than one of its own (sidecar-migration.ts).
 */
export const POD_TEMPLATE_ANNOTATION = 'runlet.dev/pod-template';

/** The digest a Deployment carries of its pod template, as this operator rendered it. */
export function podTemplateDigestOf(deployment: { metadata?: { annotations?: Record<string, string> } }): string | undefined {
  return deployment.metadata?.annotations?.[POD_TEMPLATE_ANNOTATION];
}

/**
 * `replicas`: the size to apply, or null to leave `spec.replicas` to the autoscaler
 * (autoscaling/replicas-owner.ts); the App's minimum by default.
 */
export function renderDeployment(app: App, config: RenderConfig, pod: PodInputs, replicas: number | null = app.spec.scaling.minReplicas): V1Deployment {
  const { scaling } = app.spec;
  const { codeHash } = pod;
  const appContainer = renderAppContainer(app, config);
  const sidecarContainer = renderSidecarContainer(app, config);
  const codeConfigMap = app.spec.runtime.python?.code.configMap;
  const volumes: V1Volume[] = [
    { name: DATA_VOLUME, emptyDir: {} },
    { name: SIDECAR_TMP_VOLUME, emptyDir: {} },
    { name: APP_TMP_VOLUME, emptyDir: {} },
    sidecarTokenVolume(),
    ...(config.resultsCollectorUrl === null ? [] : [resultsTokenVolume()]),
    adminKeyVolume(),
    ...(codeConfigMap === undefined ? [] : [{ name: CODE_VOLUME, configMap: { name: codeConfigMap.name } }]),
  ];
  const template: V1PodTemplateSpec = {
    metadata: {
      labels: appLabels(app),
      annotations: {
        'kubectl.kubernetes.io/default-container': APP_CONTAINER,
        ...(codeHash === undefined ? {} : { [CODE_HASH_ANNOTATION]: codeHash }),
      },
    },
    spec: {
      serviceAccountName: SIDECAR_SERVICE_ACCOUNT,
      // Mounted into the sidecar alone (sidecarTokenVolume), not into every container.
      automountServiceAccountToken: false,
      // Hundreds of Services per namespace would otherwise become thousands of env variables per pod.
      enableServiceLinks: false,
      securityContext: POD_SECURITY_CONTEXT,
      // The same for every App: the runtime's, the sidecar's and a custom image may all be in a private registry.
      ...(config.imagePullSecrets.length === 0 ? {} : { imagePullSecrets: config.imagePullSecrets.map(({ name }) => ({ name })) }),
      terminationGracePeriodSeconds: scaling.responseGracePeriod + TERMINATION_MARGIN_SECONDS,
      ...(config.nativeSidecars ? { initContainers: [sidecarContainer], containers: [appContainer] } : { containers: [appContainer, sidecarContainer] }),
      volumes,
    },
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { ...childMetadata(app, childName(app)), annotations: { [POD_TEMPLATE_ANNOTATION]: createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 16) } },
    spec: {
      ...(replicas === null ? {} : { replicas }),
      selector: { matchLabels: selectorLabels(app) },
      template,
    },
  };
}

/** Whether a rendered Deployment runs its sidecar as a native sidecar (an init container); undefined when it has none. */
export function nativeSidecarOf(deployment: { spec?: { template?: { spec?: V1PodSpec } } }): boolean | undefined {
  const pod = deployment.spec?.template?.spec;
  if (pod?.initContainers?.some((container) => container.name === SIDECAR_CONTAINER) === true) return true;
  return pod?.containers?.some((container) => container.name === SIDECAR_CONTAINER) === true ? false : undefined;
}

/**
 * The sidecar's token for the results collector: for that audience alone (worth nothing to the API server or
 * anything else), bound to the pod (it dies with it, and the collector learns from it which pod sends), short-lived
 * and rotated by the kubelet. The collector takes this pod's App's runs on it, and nothing else.
 */
function resultsTokenVolume(): V1Volume {
  return {
    name: RESULTS_TOKEN_VOLUME,
    projected: { sources: [{ serviceAccountToken: { path: 'token', audience: RESULTS_TOKEN_AUDIENCE, expirationSeconds: RESULTS_TOKEN_EXPIRATION_SECONDS } }] },
  };
}

/**
 * The namespace's admin key (sidecar/admin-cancel.ts), as files in the sidecar alone: the kubelet replaces them
 * when the operator rotates the key, which an env variable would not follow. Optional, so a pod starts before
 * the operator made it; it takes no cancel until then. Readable by all: the kubelet writes a Secret volume's files
 * as root (the pod sets no fsGroup, which would change the group of every volume), and the sidecar runs as its
 * own user; only the sidecar container mounts the volume, so its processes are the only readers. With 0400 a real
 * kubelet's sidecar could not read its key, and every cancel of a running run failed (cross-tenant suite).
 */
function adminKeyVolume(): V1Volume {
  return { name: ADMIN_KEY_VOLUME, secret: { secretName: ADMIN_KEY_SECRET, optional: true, defaultMode: 0o444 } };
}

/** What the API server's service-account admission would mount into every container: token, CA, namespace. */
function sidecarTokenVolume(): V1Volume {
  return {
    name: SIDECAR_TOKEN_VOLUME,
    projected: {
      sources: [
        { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
        { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
      ],
    },
  };
}
