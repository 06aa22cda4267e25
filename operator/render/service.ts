// The Service in front of an App's pods: port 80, named http, to the sidecar's run port. The app container
// is never a Service target: every call passes the sidecar. An App that scales to zero has a second one,
// headless, listing its ready replicas for the activator.
import type { V1Service } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { scalesToZero } from '../autoscaling/endpoints.ts';
import { childMetadata, selectorLabels } from './labels.ts';
import { SERVICE_PORT, SERVICE_PORT_NAME, SIDECAR_RUN_PORT, childName, replicasServiceName } from './names.ts';

export function renderService(app: App): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMetadata(app, childName(app)),
    spec: {
      type: 'ClusterIP',
      // An App that scales to zero has no selector: its Endpoints are the operator's (autoscaling/endpoints.ts).
      ...(scalesToZero(app) ? {} : { selector: selectorLabels(app) }),
      // A number, not the container port's name: endpoint controllers resolve names in init containers
      // (native sidecars) only on recent Kubernetes versions.
      ports: [{ name: SERVICE_PORT_NAME, port: SERVICE_PORT, targetPort: SIDECAR_RUN_PORT, protocol: 'TCP' }],
    },
  };
}

/**
 * The ready replicas of an App that scales to zero, as Kubernetes' endpoints controller lists them: a headless
 * Service with the App's selector, whose Endpoints (named as it) the activator watches to hand held calls to the
 * replicas as each becomes ready — so that it reads no pod (docs/security.md). Headless: no cluster IP, nothing
 * routes through it; the App's own Service has no selector, its endpoints being the operator's to point at the
 * replicas or the activator (autoscaling/endpoints.ts).
 */
export function renderReplicasService(app: App): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMetadata(app, replicasServiceName(app.metadata.name)),
    spec: {
      type: 'ClusterIP',
      clusterIP: 'None',
      selector: selectorLabels(app),
      // Only ready pods: those the activator may hand a call to.
      publishNotReadyAddresses: false,
      ports: [{ name: SERVICE_PORT_NAME, port: SIDECAR_RUN_PORT, targetPort: SIDECAR_RUN_PORT, protocol: 'TCP' }],
    },
  };
}
