// Apps and configurations for the operator's tests, built the way the API server stores them (defaults
// applied), so a test states only what it is about.
import type { App } from '../../crds/app-schema.ts';
import { applyAppDefaults } from '../../crds/validate.ts';
import type { RenderConfig } from '../../operator/config.ts';

export const SIDECAR_IMAGE = 'runlet/runlet:test';
export const PYTHON_IMAGE = 'runlet/python-runtime:test';

/** An App as stored: defaults applied, with uid and generation, in namespace `team-a` unless said. */
export function storedApp(spec: Record<string, unknown>, metadata: { name?: string; namespace?: string; uid?: string; generation?: number } = {}): App {
  const { name = 'hello', namespace = 'team-a', uid = '0c5a7f1e-uid', generation = 1 } = metadata;
  return applyAppDefaults({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name, namespace, uid, generation }, spec }) as App;
}

/** The spec of a Python app whose code is the ConfigMap `<configMap>`. */
export function pythonSpec(extra: Record<string, unknown> = {}, configMap = 'hello-code'): Record<string, unknown> {
  return { runtime: { python: { code: { configMap: { name: configMap } } } }, ...extra };
}

export function renderConfig(overrides: Partial<RenderConfig> = {}): RenderConfig {
  return {
    sidecarImage: SIDECAR_IMAGE,
    pythonRuntimeImage: PYTHON_IMAGE,
    nativeSidecars: true,
    webhookAllowCidrs: [],
    imagePullSecrets: [],
    ingress: null,
    networkPolicy: null,
    resultsCollectorUrl: null,
    ...overrides,
  };
}
