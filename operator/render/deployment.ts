// The Deployment of an App: its pods run the app container and the sidecar, with the sidecar's RunLog
// token, a scratch directory for run records and, for mounted code, the code ConfigMap at /app.
import type { V1Deployment, V1Volume } from '@kubernetes/client-node';
import { scalesToZero } from '../autoscaling/endpoints.ts';
import type { App } from '../../crds/app-schema.ts';
import type { RenderConfig } from '../config.ts';
import { renderAppContainer } from './app-container.ts';
import { CODE_HASH_ANNOTATION, appLabels, childMetadata, selectorLabels } from './labels.ts';
import {
  APP_CONTAINER,
  CODE_VOLUME,
  DATA_VOLUME,
  SIDECAR_SERVICE_ACCOUNT,
  SIDECAR_TOKEN_VOLUME,
  TERMINATION_MARGIN_SECONDS,
  childName,
} from './names.ts';
import { renderSidecarContainer } from './sidecar-container.ts';

/**
 * `codeHash`: digest of the code ConfigMap's content (render/code-hash.ts), undefined when the code is baked,
 * the runtime is custom, or the ConfigMap does not exist yet.
 */
export function renderDeployment(app: App, config: RenderConfig, codeHash: string | undefined): V1Deployment {
  const { scaling } = app.spec;
  const appContainer = renderAppContainer(app, config);
  const sidecarContainer = renderSidecarContainer(app, config);
  const codeConfigMap = app.spec.runtime.python?.code.configMap;
  const volumes: V1Volume[] = [
    { name: DATA_VOLUME, emptyDir: {} },
    sidecarTokenVolume(),
    ...(codeConfigMap === undefined ? [] : [{ name: CODE_VOLUME, configMap: { name: codeConfigMap.name } }]),
  ];
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: childMetadata(app, childName(app)),
    spec: {
      // Autoscaling is not the operator's yet: the App runs its minimum — unless that is zero, when the scale
      // subresource owns the replicas (the holder wakes the app, the scaler puts it to sleep); a new Deployment
      // then starts with Kubernetes' default of one.
      ...(scalesToZero(app) ? {} : { replicas: scaling.minReplicas }),
      selector: { matchLabels: selectorLabels(app) },
      template: {
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
          terminationGracePeriodSeconds: scaling.responseGracePeriod + TERMINATION_MARGIN_SECONDS,
          ...(config.nativeSidecars ? { initContainers: [sidecarContainer], containers: [appContainer] } : { containers: [appContainer, sidecarContainer] }),
          volumes,
        },
      },
    },
  };
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
