// Names, ports and paths shared by the objects rendered for an App: one place to read how they connect
// (Service :80 → sidecar :8000 → app container :8192 or the custom port; probes and drain on :8001).
import { createHash } from 'node:crypto';
import { SIDECAR_POD_PORTS, type App, type AppSpec } from '../../crds/app-schema.ts';
import type { IngressConfig } from '../config.ts';

export const SIDECAR_RUN_PORT = SIDECAR_POD_PORTS.run;
export const SIDECAR_ADMIN_PORT = SIDECAR_POD_PORTS.admin;
export const PYTHON_RUNTIME_PORT = 8192;
export const SERVICE_PORT = 80;
export const SERVICE_PORT_NAME = 'http';

export const APP_CONTAINER = 'app';
export const SIDECAR_CONTAINER = 'sidecar';

/** The sidecar's identity in every app namespace: it may write RunLogs, nothing else. */
export const SIDECAR_SERVICE_ACCOUNT = 'runlet-sidecar';
/** Bound to the ServiceAccount in each app namespace; the chart ships it (charts/runlet/templates/sidecar-clusterrole.yaml). */
export const SIDECAR_CLUSTER_ROLE = 'runlet-sidecar';
export const SIDECAR_ROLE_BINDING = 'runlet-sidecar';
/** The per-namespace Role earlier versions bound instead of the ClusterRole: deleted where found. */
export const LEGACY_SIDECAR_ROLE = 'runlet-sidecar';
/** Each app namespace's own hand-over key (render/holder-key.ts); the sidecar reads it into RUNLET_HOLDER_KEY. */
export const HOLDER_KEY_SECRET = 'runlet-holder-key';
/** The entry of the holder key Secrets (the control key's and the namespaces') that holds the key, as hex text. */
export const HOLDER_KEY_DATA_KEY = 'key';

export const CODE_VOLUME = 'code';
export const DATA_VOLUME = 'runlet-data';
export const SIDECAR_TOKEN_VOLUME = 'sidecar-token';
/** The sidecar's projected token for the results collector (render/deployment.ts): only with a results store. */
export const RESULTS_TOKEN_VOLUME = 'results-token';
/** The namespace's admin key Secret (sidecar/admin-cancel.ts), mounted into the sidecar alone. */
export const ADMIN_KEY_VOLUME = 'admin-key';
/** Each container's /tmp: the root filesystem is read-only. One each, so the app cannot plant files for the sidecar. */
export const APP_TMP_VOLUME = 'app-tmp';
export const SIDECAR_TMP_VOLUME = 'sidecar-tmp';

export const APP_DIR = '/app';
export const DATA_DIR = '/var/run/runlet';
export const TMP_DIR = '/tmp';
/** Where client-node's in-cluster config looks for the service-account token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Where the sidecar finds its token for the results collector (the file `token`). */
export const RESULTS_TOKEN_DIR = '/var/run/secrets/runlet.dev/results';
/**
 * The lifetime asked for the collector's token: the API server's least (10 minutes). The kubelet writes a new one
 * once 80% of it has passed; one taken from a pod is worth at most that long, and only for that pod's App.
 */
export const RESULTS_TOKEN_EXPIRATION_SECONDS = 600;

/** Seconds Kubernetes waits beyond the longest run before killing a draining pod. */
export const TERMINATION_MARGIN_SECONDS = 30;

export function namespaceOf(app: App): string {
  const namespace = app.metadata.namespace;
  if (!namespace) throw new Error(`App "${app.metadata.name}" has no namespace`);
  return namespace;
}

/** Deployment, Service and Ingress share the App's name: one App, one of each per namespace. */
export function childName(app: App): string {
  return app.metadata.name;
}

/**
 * The headless Service listing the ready replicas of an App that scales to zero (render/service.ts), whose
 * Endpoints the activator reads: `<app>-replicas-<4 hex of a digest of the app name>`, the name cut to fit a DNS
 * label. The digest keeps it apart from the Service of an App that is named `<app>-replicas` itself.
 */
/** Whether a Service (or its Endpoints) is named as replicasServiceName names them. */
export function isReplicasServiceName(name: string): boolean {
  return /-replicas-[0-9a-f]{4}$/.test(name);
}

export function replicasServiceName(appName: string): string {
  const digest = createHash('sha256').update(appName).digest('hex').slice(0, 4);
  return `${appName.slice(0, 63 - '-replicas-'.length - digest.length)}-replicas-${digest}`;
}

/** The run interface path of the app; the sidecar serves `{method} <prefix>/{function}`. */
export function runPathPrefix(app: App): string {
  return `/v4/${namespaceOf(app)}/${app.metadata.name}`;
}

/** The port the app container listens on (the sidecar forwards there over loopback). */
export function appPort(spec: AppSpec): number {
  return spec.runtime.custom?.port ?? PYTHON_RUNTIME_PORT;
}

/** The placeholder of a per-namespace ingress host (`{namespace}.apps.example.com`). */
export const NAMESPACE_HOST_PLACEHOLDER = '{namespace}';

/**
 * The host an App's Ingress is on: the configured host, with `{namespace}` replaced by the App's namespace. A
 * host of its own per namespace keeps one tenant's Ingress rules off another's host: on a shared host, any
 * tenant may publish a longer path prefix and receive another's callers (docs/operator.md, Ingress).
 */
export function ingressHostOf(app: App, ingress: Pick<IngressConfig, 'host'>): string | undefined {
  return ingress.host?.replaceAll(NAMESPACE_HOST_PLACEHOLDER, namespaceOf(app));
}

/** Where callers reach the app: through the ingress host when there is one, else the Service's cluster DNS name. */
export function appUrl(app: App, ingress: IngressConfig | null): string {
  const host = ingress === null ? undefined : ingressHostOf(app, ingress);
  if (host !== undefined) return `${ingress?.tls ? 'https' : 'http'}://${host}${runPathPrefix(app)}`;
  return `http://${childName(app)}.${namespaceOf(app)}.svc.cluster.local${runPathPrefix(app)}`;
}
