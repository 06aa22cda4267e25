// `runlet deploy APP_DIR`: applies the App (and its code ConfigMap) to the current kube context, then follows
// the App's conditions until it is Ready (serving what was deployed), or says why it is not.
import type { App, Condition } from '../crds/app-schema.ts';
import { KubeApi } from '../kube/client.ts';
import { kubeConfigCredentials } from '../kube/kubeconfig.ts';
import { KubeApiError } from '../kube/errors.ts';
import { resourcePath } from '../kube/objects.ts';
import { validateApp } from '../crds/validate.ts';
import { appManifests } from './app-folder.ts';
import { parseCommandArgs } from './arguments.ts';
import { CliError } from './cli-error.ts';
import { currentKubeConfig } from './current-kube-config.ts';

export const DEPLOY_USAGE = `Usage: runlet deploy APP_DIR [--namespace NS] [--image IMAGE] [--timeout SECONDS] [--no-wait]

Applies the App that APP_DIR describes (and its code, in a ConfigMap) to the current kube context, then shows
its progress until it is Ready: serving what was deployed, the rollout done (exit 0); or says why it is
not (exit 1).

Options:
  --namespace NS      the project (default: the context's namespace, else default)
  --image IMAGE       the app's code is baked into IMAGE (see runlet dockerfile) instead of a ConfigMap
  --timeout SECONDS   how long to wait for Ready (default 300)
  --no-wait           apply and exit`;

const FIELD_MANAGER = 'runlet-cli';
const POLL_MS = 1000;

export async function runDeployCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(args);
  const [appDir, ...extra] = positionals;
  if (!appDir || extra.length > 0) throw new CliError(`runlet deploy takes one APP_DIR\n\n${DEPLOY_USAGE}`, 2);
  const timeoutSeconds = Number(values.timeout);
  if (!(timeoutSeconds > 0)) throw new CliError(`--timeout must be a positive number of seconds, got "${values.timeout}"`, 2);

  const kubeConfig = currentKubeConfig();
  const namespace = values.namespace ?? kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace ?? 'default';
  const { app, code } = await appManifests(appDir, { namespace, image: values.image });
  const problems = validateApp(app);
  if (problems.length > 0) throw new CliError(`the App ${app.metadata.name} is invalid:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join('\n')}`);

  const api = new KubeApi(kubeConfigCredentials(kubeConfig), { fieldManager: FIELD_MANAGER, requestTimeoutMs: 30_000 });
  try {
    if (code) await applyOrExplain(api, code, namespace);
    const applied = await applyOrExplain(api, app, namespace);
    say(`applied app ${namespace}/${app.metadata.name}${code ? ` and its code (ConfigMap ${code.metadata.name})` : ''}`);
    if (values['no-wait']) return 0;
    return await followUntilReady(api, applied, timeoutSeconds * 1000);
  } finally {
    await api.close();
  }
}

async function applyOrExplain<T extends { kind: string; metadata: { name: string } }>(api: KubeApi, object: T, namespace: string): Promise<T> {
  try {
    return await api.apply(object as T & { apiVersion: string });
  } catch (err) {
    if (!(err instanceof KubeApiError)) throw err;
    const what = `${object.kind} ${namespace}/${object.metadata.name}`;
    if (err.status === 0) throw new CliError(`cannot reach the cluster of the current context (${err.message}): check KUBECONFIG and the context`);
    if (err.status === 401) throw new CliError(`the cluster refused the credentials of the current context (${err.reason ?? '401'}): log in again`);
    if (err.status === 403) throw new CliError(`not allowed to apply ${what}: ${err.message}; ask for a RoleBinding that lets you manage apps.runlet.dev in ${namespace}`);
    if (err.status === 404 && object.kind === 'App') {
      throw new CliError('the cluster does not know Apps (runlet.dev): install Runlet first: helm install runlet charts/runlet -n runlet-system --create-namespace (or kubectl apply -f install.yaml)');
    }
    if (err.status === 404) throw new CliError(`namespace ${namespace} does not exist: kubectl create namespace ${namespace}, or pass --namespace`);
    if (err.status === 422) throw new CliError(`the cluster refused ${what} as invalid: ${err.message}`);
    throw new CliError(`applying ${what} failed: ${err.message}`);
  }
}

/**
 * Prints condition changes until Ready=True for the applied generation (0), an unrecoverable condition, or the
 * timeout (1). Not Available: while a change rolls out, the old replicas keep the App Available.
 */
async function followUntilReady(api: KubeApi, applied: App, timeoutMs: number): Promise<number> {
  const path = resourcePath({ apiVersion: applied.apiVersion, kind: applied.kind, namespace: applied.metadata.namespace, name: applied.metadata.name });
  const deadline = Date.now() + timeoutMs;
  const generation = applied.metadata.generation ?? 0;
  const shown = new Map<string, string>();
  let app = applied;
  for (;;) {
    const status = app.status;
    const current = status !== undefined && (status.observedGeneration ?? 0) >= generation;
    if (current) {
      for (const [key, line] of [...(status.conditions ?? []).map((c) => [c.type, describe(c)] as const), ['replicas', replicasLine(status)] as const]) {
        if (shown.get(key) !== line) {
          shown.set(key, line);
          say(line);
        }
      }
      const ready = status.conditions?.find((c) => c.type === 'Ready');
      if (ready?.status === 'False' && ready.reason === 'InvalidSpec') {
        throw new CliError(`the operator refused the App: ${ready.message}; fix service.toml and deploy again`);
      }
      if (ready?.status === 'True') {
        say(`${app.metadata.name} is ready${status.url ? ` at ${status.url}` : ''}`);
        return 0;
      }
    }
    if (Date.now() > deadline) {
      const conditions = (status?.conditions ?? []).map((c) => `  ${describe(c)}`).join('\n') || '  (no status yet: is the Runlet operator running?)';
      process.stderr.write(`runlet deploy: ${app.metadata.name} is not ready after ${timeoutMs / 1000} s:\n${conditions}\n`);
      return 1;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    app = await api.get<App>(path);
  }
}

/** `Replicas: 1 ready of 2 (autoscaler wants 3: PanicBurst)`: what runs, and what the autoscaler asked for. */
function replicasLine(status: NonNullable<App['status']>): string {
  const wanted = status.desiredReplicas === undefined ? '' : ` (autoscaler wants ${status.desiredReplicas}${status.lastScaling ? `: ${status.lastScaling.reason}` : ''})`;
  return `Replicas: ${status.readyReplicas ?? 0} ready of ${status.replicas ?? 0}${wanted}`;
}

function describe(condition: Condition): string {
  return `${condition.type}: ${condition.status} (${condition.reason}${condition.message ? `: ${condition.message}` : ''})`;
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

function parse(args: string[]) {
  return parseCommandArgs(
    args,
    {
      namespace: { type: 'string' },
      image: { type: 'string' },
      timeout: { type: 'string', default: '300' },
      'no-wait': { type: 'boolean', default: false },
    },
    DEPLOY_USAGE,
  );
}
