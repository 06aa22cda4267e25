// Names, ports and paths shared by the objects rendered for an App: one place to read how they connect
// (Service :80 → sidecar :8000 → app container :8192 or the custom port; probes and drain on :8001).
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

/** The run interface path of the app; the sidecar serves `{method} <prefix>/{function}`. */
export function runPathPrefix(app: App): string {
  return `/v4/${namespaceOf(app)}/${app.metadata.name}`;
}

/** The port the app container listens on (the sidecar forwards there over loopback). */
export function appPort(spec: AppSpec): number {
  return spec.runtime.custom?.port ?? PYTHON_RUNTIME_PORT;
}

/** Where callers reach the app: through the ingress host when there is one, else the Service's cluster DNS name. */
export function appUrl(app: App, ingress: IngressConfig | null): string {
  if (ingress?.host !== undefined) return `${ingress.tls ? 'https' : 'http'}://${ingress.host}${runPathPrefix(app)}`;
  return `http://${childName(app)}.${namespaceOf(app)}.svc.cluster.local${runPathPrefix(app)}`;
}
