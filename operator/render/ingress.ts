// The Ingress of an App: the path prefix /v4/{namespace}/{app} on the configured host (or any host; or a host
// per namespace, `{namespace}.apps.example.com`) to the App's Service. Prefix matching is per path element, so
// /v4/ns/app never catches /v4/ns/apple.
import type { V1Ingress } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import type { IngressConfig } from '../config.ts';
import { childMetadata } from './labels.ts';
import { SERVICE_PORT_NAME, childName, ingressHostOf, runPathPrefix } from './names.ts';

export function renderIngress(app: App, ingress: IngressConfig): V1Ingress {
  const metadata = childMetadata(app, childName(app));
  if (ingress.annotations !== undefined) metadata.annotations = { ...ingress.annotations };
  const backend = { service: { name: childName(app), port: { name: SERVICE_PORT_NAME } } };
  const host = ingressHostOf(app, ingress);
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata,
    spec: {
      ...(ingress.className === undefined ? {} : { ingressClassName: ingress.className }),
      ...(ingress.tls && host !== undefined
        ? { tls: [{ hosts: [host], ...(ingress.tlsSecretName === undefined ? {} : { secretName: ingress.tlsSecretName }) }] }
        : {}),
      rules: [
        {
          ...(host === undefined ? {} : { host }),
          http: { paths: [{ path: runPathPrefix(app), pathType: 'Prefix', backend }] },
        },
      ],
    },
  };
}
