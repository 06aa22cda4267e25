// The Service in front of an App's pods: port 80, named http, to the sidecar's run port. The app container
// is never a Service target: every call passes the sidecar.
import type { V1Service } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { scalesToZero } from '../autoscaling/endpoints.ts';
import { childMetadata, selectorLabels } from './labels.ts';
import { SERVICE_PORT, SERVICE_PORT_NAME, SIDECAR_RUN_PORT, childName } from './names.ts';

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
