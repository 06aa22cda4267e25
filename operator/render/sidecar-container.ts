// The sidecar container: `runlet sidecar` in front of the app container, serving the run interface on
// :8000 and probes, metrics and drain on :8001. As a native sidecar (an init container that keeps running)
// it starts before the app container and stops after it, so a draining app never loses its front door.
import type { V1Container, V1EnvVar, V1Probe } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { HOLDER_KEY_ENV } from '../../run-request/auth/held-run.ts';
import { ADMIN_KEY_DIR } from '../../sidecar/admin-cancel.ts';
import { RESULTS_TOKEN_FILE_ENV, RESULTS_URL_ENV } from '../../sidecar/runs/results-shipper-store.ts';
import type { RenderConfig } from '../config.ts';
import {
  ADMIN_KEY_VOLUME,
  DATA_DIR,
  DATA_VOLUME,
  HOLDER_KEY_DATA_KEY,
  HOLDER_KEY_SECRET,
  RESULTS_TOKEN_DIR,
  RESULTS_TOKEN_VOLUME,
  SERVICE_ACCOUNT_DIR,
  SIDECAR_ADMIN_PORT,
  SIDECAR_CONTAINER,
  SIDECAR_RUN_PORT,
  SIDECAR_TMP_VOLUME,
  SIDECAR_TOKEN_VOLUME,
  TMP_DIR,
  appPort,
  namespaceOf,
} from './names.ts';
import { SIDECAR_UID, containerSecurityContext } from './pod-security.ts';

/**
 * The sidecar's Node flags. Node sizes V8's young generation from the memory it sees (the node's, or the
 * container's limit): up to 64 MB semi-spaces on a large node, which the sidecar's short-lived request garbage
 * fills, ~100 MB of RSS more. 4 MB semi-spaces measured the best of 2, 4 and 8 for throughput, p99 and RSS
 * together. --expose-gc lets the sidecar collect once a busy period is over (sidecar/idle-collection.ts).
 * `make bench` starts its sidecars with this value; the measurement is in bench/results.md.
 */
export const SIDECAR_NODE_OPTIONS = '--max-semi-space-size=4 --expose-gc';

/** Where the runlet image has jemalloc: Debian's libjemalloc2, linked there whatever the architecture (Dockerfile). */
export const IMAGE_JEMALLOC_PATH = '/usr/local/lib/libjemalloc.so.2';

/**
 * The sidecar's allocator: jemalloc instead of glibc's malloc. glibc keeps the pages a load fragmented (a freed
 * chunk below a live one is never returned): 8–20 MB more RSS after the same load, varying from run to run.
 * jemalloc's background thread returns pages unused for a second. Each thread caches freed blocks up to 64 KB
 * (tcache_max), the size of Node's socket read buffers: with jemalloc's default (32 KB) each read's buffer came
 * from the arena itself, under its lock, and the sidecar's p99 was twice glibc's. Measured in bench/results.md (the sidecar memory section). An image without the library at `libraryPath`
 * starts all the same: the dynamic loader says so on stderr and runs with glibc's.
 */
export const SIDECAR_MALLOC_CONF = 'background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,tcache_max:65536';

export function sidecarAllocatorEnv(libraryPath: string): { LD_PRELOAD: string; MALLOC_CONF: string } {
  return { LD_PRELOAD: libraryPath, MALLOC_CONF: SIDECAR_MALLOC_CONF };
}

const adminGet = (path: string, probe: Omit<V1Probe, 'httpGet'>): V1Probe => ({
  httpGet: { path, port: SIDECAR_ADMIN_PORT },
  ...probe,
});

export function renderSidecarContainer(app: App, config: RenderConfig): V1Container {
  const { spec } = app;
  const custom = spec.runtime.custom;
  const readyPath = custom?.readycheckEndpoint ?? custom?.healthcheckEndpoint;
  const args = [
    'sidecar',
    '--project', namespaceOf(app),
    '--app', app.metadata.name,
    '--runtime', custom === undefined ? 'python' : 'custom',
    '--app-port', String(appPort(spec)),
    '--port', String(SIDECAR_RUN_PORT),
    '--admin-port', String(SIDECAR_ADMIN_PORT),
    '--concurrency', String(spec.scaling.replicaConcurrency),
    '--response-grace-period', String(spec.scaling.responseGracePeriod),
    // Callers' tokens are checked unless the App turns auth off (spec.auth.enabled: false).
    '--auth', spec.auth.enabled ? 'on' : 'off',
    // With a results store, records go to its collector; the RunLog then is not written (the pod's Role still allows it).
    '--run-store', config.resultsCollectorUrl === null ? 'runlog' : 'results',
    '--data-dir', DATA_DIR,
    // Where the admin key's Secret is mounted (below): it signs the operator's cancels.
    '--admin-key-dir', ADMIN_KEY_DIR,
    ...(readyPath === undefined ? [] : ['--ready-path', readyPath]),
    // The app container's liveness probe asks the sidecar's /app-healthz, which asks this path on the loopback.
    ...(custom?.healthcheckEndpoint === undefined ? [] : ['--health-path', custom.healthcheckEndpoint]),
    // Results are kept only in the results store: a RunLog (etcd) never holds them.
    ...(spec.runs.keepResults && config.resultsCollectorUrl !== null
      ? ['--keep-results', 'on', '--result-keep-bytes', String(spec.runs.resultKeepBytes), '--result-ttl', String(spec.runs.resultTtl)]
      : []),
  ];
  const env: V1EnvVar[] = [
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'NODE_OPTIONS', value: SIDECAR_NODE_OPTIONS },
    ...Object.entries(sidecarAllocatorEnv(IMAGE_JEMALLOC_PATH)).map(([name, value]) => ({ name, value })),
    ...(config.webhookAllowCidrs.length === 0 ? [] : [{ name: 'RUNLET_WEBHOOK_ALLOW_CIDRS', value: config.webhookAllowCidrs.join(',') }]),
    // The key the scale-to-zero holder signs hand-overs with (the run id an async caller got, the wait), from the
    // namespace's copy of it (render/holder-key.ts). Optional: without a holder there is no copy, and the pod
    // starts all the same — it then takes no hand-over's word for a run id.
    { name: HOLDER_KEY_ENV, valueFrom: { secretKeyRef: { name: HOLDER_KEY_SECRET, key: HOLDER_KEY_DATA_KEY, optional: true } } },
    // The collector takes a batch on the pod's own projected token for it (render/deployment.ts), not on a key.
    ...(config.resultsCollectorUrl === null
      ? []
      : [
          { name: RESULTS_URL_ENV, value: config.resultsCollectorUrl },
          { name: RESULTS_TOKEN_FILE_ENV, value: `${RESULTS_TOKEN_DIR}/token` },
        ]),
  ];
  return {
    name: SIDECAR_CONTAINER,
    image: config.sidecarImage,
    command: ['runlet'],
    args,
    env,
    ports: [
      { name: 'http', containerPort: SIDECAR_RUN_PORT, protocol: 'TCP' },
      { name: 'admin', containerPort: SIDECAR_ADMIN_PORT, protocol: 'TCP' },
    ],
    // Liveness counts only once this passes, so a sidecar slow to start (a busy node) is not killed for it.
    // As a native sidecar the kubelet also starts the app container only then, so it asks /healthz: /ready
    // waits for the app container and would never pass.
    startupProbe: adminGet('/healthz', { periodSeconds: 1, failureThreshold: 120, timeoutSeconds: 5 }),
    ...(config.nativeSidecars ? { restartPolicy: 'Always' } : {}),
    // Fails at once while draining, so the endpoint leaves the Service before the pod stops taking runs. Every
    // second (the kubelet's shortest): a replica started for calls held at zero serves them on average half a
    // period after its app is ready, so the period is part of every cold start.
    // A slow answer is not a failure below 5 s: on a starved node (a burst of pods starting on two cores) a
    // sidecar answering late is busy, not gone, and the draining answer is an immediate 503 either way.
    readinessProbe: adminGet('/ready', { periodSeconds: 1, failureThreshold: 1, timeoutSeconds: 5 }),
    // /healthz asks only that the process answers (or that a drain by hand is over): a minute of missed answers
    // in a row, not a busy half-minute, restarts it, since a restart loses every run in flight.
    livenessProbe: adminGet('/healthz', { periodSeconds: 10, failureThreshold: 6, timeoutSeconds: 5 }),
    resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
    securityContext: containerSecurityContext(SIDECAR_UID),
    volumeMounts: [
      // The root filesystem is read-only.
      { name: SIDECAR_TMP_VOLUME, mountPath: TMP_DIR },
      // The pod's emptyDir: the RunLog journal, where async runs are made durable before their 202, lives as
      // long as the pod, so it outlives a crash or restart of this container.
      { name: DATA_VOLUME, mountPath: DATA_DIR },
      // Only the sidecar gets the token that may write RunLogs; the app's code never sees it.
      { name: SIDECAR_TOKEN_VOLUME, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true },
      // The token the results collector takes this pod's batches on: the sidecar's alone, as the one above.
      ...(config.resultsCollectorUrl === null ? [] : [{ name: RESULTS_TOKEN_VOLUME, mountPath: RESULTS_TOKEN_DIR, readOnly: true }]),
      // The namespace's admin key, which signs the operator's cancels (sidecar/admin-cancel.ts); the app never sees it.
      { name: ADMIN_KEY_VOLUME, mountPath: ADMIN_KEY_DIR, readOnly: true },
    ],
  };
}
