// The app container: the Runlet Python runtime importing the user's module, or the user's own HTTP server
// image. Either way it takes calls only from the sidecar, stops only after the sidecar drained it, and gets
// the App's environment and hardware.
import type { V1Container, V1EnvVar, V1ResourceRequirements } from '@kubernetes/client-node';
import type { App, AppResources, CustomRuntime, EnvVar, PythonRuntime } from '../../crds/app-schema.ts';
import { DRAIN_PATH } from '../../sidecar/admin-cancel.ts';
import type { RenderConfig } from '../config.ts';
import { APP_CONTAINER, APP_DIR, APP_TMP_VOLUME, CODE_VOLUME, PYTHON_RUNTIME_PORT, SIDECAR_ADMIN_PORT, TMP_DIR } from './names.ts';
import { CUSTOM_IMAGE_UID, PYTHON_RUNTIME_UID, containerSecurityContext } from './pod-security.ts';

export const GPU_RESOURCE = 'nvidia.com/gpu';

export function renderAppContainer(app: App, config: RenderConfig): V1Container {
  const { custom, python } = app.spec.runtime;
  const { volumeMounts = [], ...specific } = custom !== undefined ? customRuntime(custom, app.spec.env) : pythonRuntime(app, python!, config); // validated: exactly one runtime
  const resources = resourcesOf(app.spec.resources);
  return {
    name: APP_CONTAINER,
    ...specific,
    ...(resources === undefined ? {} : { resources }),
    securityContext: containerSecurityContext(custom !== undefined ? CUSTOM_IMAGE_UID : PYTHON_RUNTIME_UID),
    // The root filesystem is read-only: /tmp is where the app may write.
    volumeMounts: [...volumeMounts, { name: APP_TMP_VOLUME, mountPath: TMP_DIR }],
    // The kubelet runs this before SIGTERM; the sidecar answers once in-flight runs and webhooks are done,
    // so the app is stopped only after nothing depends on it. No secret: the sidecar drains only once the API
    // server says the pod is being deleted (sidecar/pod-termination.ts), so anyone else's /drain changes nothing.
    lifecycle: { preStop: { httpGet: { path: DRAIN_PATH, port: SIDECAR_ADMIN_PORT } } },
  };
}

type RuntimeFields = Omit<V1Container, 'name'>;

function pythonRuntime(app: App, python: PythonRuntime, config: RenderConfig): RuntimeFields {
  const { replicaConcurrency } = app.spec.scaling;
  // Bytecode caches would be written beside the code, on a read-only filesystem; an image not built from
  // the runtime's (which sets this) must not try.
  const env = [{ name: 'PYTHONDONTWRITEBYTECODE', value: '1' }, ...userEnv(app.spec.env).filter((variable) => variable.name !== 'PYTHONDONTWRITEBYTECODE')];
  return {
    image: python.image ?? config.pythonRuntimeImage,
    // The runtime binds 127.0.0.1: only the sidecar in the same pod can call it.
    command: ['python', '-m', 'runlet_runtime', '--app-dir', APP_DIR, '--module', python.module, '--port', String(PYTHON_RUNTIME_PORT), '--concurrency', String(replicaConcurrency)],
    // Baked code lives at /app in the image; mounted code is put there.
    workingDir: APP_DIR,
    env,
    ...(python.code.configMap === undefined ? {} : { volumeMounts: [{ name: CODE_VOLUME, mountPath: APP_DIR, readOnly: true }] }),
  };
}

/**
 * The kubelet probes the pod IP, so a probe on the app's own port would need its server to listen there, where
 * every pod of the cluster reaches it around the sidecar's checks of callers. The app's probes go to the
 * sidecar's admin port instead, which asks the app on the loopback (sidecar/runtimes/app-health.ts): its
 * readiness is the sidecar's (`/ready` passes only while the app's ready path does: runtime-watch.ts), and its
 * liveness is `/app-healthz`, the app's health path asked by the sidecar. The app is told to listen on the
 * loopback (`HOST`), and no container port of it is declared.
 */
function customRuntime(custom: CustomRuntime, env: EnvVar[] | undefined): RuntimeFields {
  return {
    image: custom.image,
    // The entrypoint is the whole command line; without one the image's ENTRYPOINT and CMD run.
    ...(custom.entrypoint === undefined ? {} : { command: custom.entrypoint }),
    // PORT and HOST are the platform's: the sidecar forwards to 127.0.0.1:PORT, so neither can be moved by the App's env.
    env: [{ name: 'PORT', value: String(custom.port) }, { name: 'HOST', value: APP_HOST }, ...userEnv(env).filter((variable) => !PLATFORM_ENV.has(variable.name))],
    ...(custom.healthcheckEndpoint === undefined ? {} : appLivenessThroughSidecar()),
  };
}

/** Where a custom app's server is told to listen (`HOST`): only the sidecar, in the same pod, reaches it there. */
const APP_HOST = '127.0.0.1';

const PLATFORM_ENV = new Set(['PORT', 'HOST']);

/** The sidecar's APP_HEALTH_ROUTE (sidecar/admin-interface.ts), as its /healthz and /ready are named in sidecar-container.ts. */
const appHealthGet = () => ({ httpGet: { path: '/app-healthz', port: SIDECAR_ADMIN_PORT } });

/**
 * The app container's liveness, asked of the sidecar. Generous, since a restart loses the app's calls in flight:
 * the sidecar waits 4 s for the app (APP_HEALTH_TIMEOUT_MS), the kubelet 5 s for the sidecar, and only a minute
 * of failed checks in a row (6 × 10 s) restarts the app — a server that hangs, or stopped listening while its
 * process lives (one that exits is restarted at once anyway). The startup probe holds liveness off for up to
 * 5 minutes while the server starts, and counts the seconds the sidecar itself takes to start. Every second:
 * the app container is ready only once it passed, so a longer period would delay every cold start.
 */
function appLivenessThroughSidecar(): Pick<V1Container, 'startupProbe' | 'livenessProbe'> {
  return {
    startupProbe: { ...appHealthGet(), periodSeconds: 1, failureThreshold: 300, timeoutSeconds: 5 },
    livenessProbe: { ...appHealthGet(), periodSeconds: 10, failureThreshold: 6, timeoutSeconds: 5 },
  };
}

/** The App's env has the Kubernetes EnvVar shape already (values and secretKeyRefs). */
function userEnv(env: EnvVar[] | undefined): V1EnvVar[] {
  return (env ?? []).map((variable) =>
    variable.valueFrom === undefined
      ? { name: variable.name, value: variable.value ?? '' }
      : { name: variable.name, valueFrom: { secretKeyRef: { name: variable.valueFrom.secretKeyRef.name, key: variable.valueFrom.secretKeyRef.key } } },
  );
}

/** CPU and memory are request and limit at once (guaranteed, predictable latency); GPUs are limits only. */
function resourcesOf(resources: AppResources | undefined): V1ResourceRequirements | undefined {
  if (resources === undefined) return undefined;
  const amounts: Record<string, string> = {};
  if (resources.cpu !== undefined) amounts.cpu = resources.cpu;
  if (resources.memory !== undefined) amounts.memory = resources.memory;
  const gpus: Record<string, string> = resources.gpu !== undefined && resources.gpu > 0 ? { [GPU_RESOURCE]: String(resources.gpu) } : {};
  if (Object.keys(amounts).length === 0 && Object.keys(gpus).length === 0) return undefined;
  return {
    ...(Object.keys(amounts).length === 0 ? {} : { requests: amounts }),
    limits: { ...amounts, ...gpus },
  };
}
