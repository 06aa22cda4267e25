// Issue #31's proof on the real tier (real-node-cluster.ts: a real kubelet, containerd and runc, install.yaml's
// operator, activator and PostgreSQL as pods). Two enrolled tenant namespaces, team-a and team-b, each with a
// Python App and a custom-runtime App, and the identities a tenant really has: a ServiceAccount with `edit` in
// its own namespace (its token), another with `admin` (which mints an API key through the management API), and a
// pod of its own, made with the `edit` token from the Python runtime's image: it runs as the namespace's
// `runlet-sidecar` with the label of one of its Apps (what `edit` may do), so it holds that App's kind of
// projected tokens, and every network attempt is made from it. Each tenant then tries every surface against the
// other — the results collector, the management API with encoded names, cancel and drain, the apps' ports and
// the sidecar's admin port, the hand-over header and the activator's hold control, its API key on the other's
// Apps and on the API server, its `edit` rights on Runlet's objects — and each attempt is refused, with its
// status, and the other tenant read back unchanged (its runs as the management API lists them, keys,
// ServiceAccounts, RoleBindings, Secrets, Apps, Deployments and pods). Last, each tenant's own credentials do
// what was refused to the other, so the refusals were not those of dead surfaces.
//
// The tier's network plugin (the CNI bridge plugin) stores NetworkPolicies and enforces none, as many do: where
// the design counts on one (the sidecar's admin port, docs/security.md), what it promises without one is asserted.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, NetworkingV1Api, RbacAuthorizationV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { HOLD_CONTROL_HEADER, holdControlPath, signHoldControl } from '../../activator/hold-control.ts';
import { APP_LABEL } from '../../crds/api-group.ts';
import type { App } from '../../crds/app-schema.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { PYTHON_RUNTIME_PORT, SIDECAR_ADMIN_PORT, SIDECAR_RUN_PORT } from '../../operator/render/names.ts';
import { PYTHON_RUNTIME_UID } from '../../operator/render/pod-security.ts';
import { HELD_RUN_HEADER, heldRunHeader, holderKeyFromText, verifiedHeldRunHeader } from '../../run-request/auth/held-run.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { RESULTS_TOKEN_AUDIENCE } from '../../results/results-token.ts';
import { ADMIN_SIGNATURE_HEADER, signAdminRequest } from '../../sidecar/admin-cancel.ts';
import { BUILT_IMAGES, realNodeSkipReason } from '../control-plane/node.ts';
import { requestToken } from '../control-plane/process-kubelet.ts';
import { kubePathOf } from '../support/kube-path.ts';
import { kubeStatusOf } from '../support/kube-status.ts';
import { waitFor } from '../support/wait.ts';
import { HelloApp } from './hello-app.ts';
import { isReady, readyAtGeneration } from './operator-suite.ts';
import { OPERATOR_NAMESPACE, RUN_AUDIENCE, SERVICE_ADDRESSES, STATE_TIMEOUT_MS, createEchoApp, startRealNodeCluster, type RealNodeCluster } from './real-node-cluster.ts';

const skipReason = realNodeSkipReason();
if (skipReason !== undefined) console.log(`cross-tenant suite on a real kubelet: skipped, ${skipReason}`);

const TEAMS = ['team-a', 'team-b'] as const;
type Team = (typeof TEAMS)[number];
const ECHO_PORT = 9000;
/** Where the tenant's own pod takes its orders (from this process, through the Node's relay). */
const AGENT_PORT = 7070;
const AGENT_POD = 'intruder';
const TOKENS_DIR = '/var/run/tenant-tokens';
/** The pod's own projected tokens, by audience: the collector's, and the run interface's. */
const RESULTS_TOKEN_FILE = `${TOKENS_DIR}/results/token`;
const RUN_TOKEN_FILE = `${TOKENS_DIR}/run/token`;
const MANAGEMENT = `http://${SERVICE_ADDRESSES['runlet-operator']}`;
const COLLECTOR = `http://${SERVICE_ADDRESSES['runlet-collector']}:8082/v1/results`;
const HOLDER_PORT = 8090;
/** A run that lasts beyond the suite: an hour of items, until its own tenant cancels it at the end. */
const LONG_RUN_SECONDS = 3600;
const LONG_RUN = { n: LONG_RUN_SECONDS * 10, pause: 0.1 };
const INVALID_PARAMETER = 'https://runlet.dev/problems#invalid-parameter';
const run = promisify(execFile);

const wait = <T>(what: string, check: () => Promise<T | false | undefined>, timeoutMs = STATE_TIMEOUT_MS) => waitFor(check, { what, timeoutMs, intervalMs: 500 });

/**
 * The pod's agent: takes an order (a request, with one of the pod's own token files as its bearer if asked),
 * sends it from inside the pod and answers with what came back, or the connection's error.
 */
const AGENT = [
  'import http.server, json, urllib.request, urllib.error',
  'class Agent(http.server.BaseHTTPRequestHandler):',
  '    def do_POST(self):',
  '        order = json.loads(self.rfile.read(int(self.headers["content-length"])))',
  '        headers = dict(order.get("headers") or {})',
  '        if order.get("bearerFile"):',
  '            headers["authorization"] = "Bearer " + open(order["bearerFile"]).read().strip()',
  '        body = order.get("body")',
  '        request = urllib.request.Request(order["url"], data=None if body is None else body.encode(), method=order["method"], headers=headers)',
  '        try:',
  '            with urllib.request.urlopen(request, timeout=30) as answer:',
  '                out = {"status": answer.status, "headers": dict(answer.headers), "body": answer.read().decode("utf-8", "replace")}',
  '        except urllib.error.HTTPError as error:',
  '            out = {"status": error.code, "headers": dict(error.headers), "body": error.read().decode("utf-8", "replace")}',
  '        except Exception as error:',
  '            out = {"error": repr(getattr(error, "reason", error))}',
  '        data = json.dumps(out).encode()',
  '        self.send_response(200); self.send_header("content-type", "application/json")',
  '        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)',
  '    def log_message(self, *args): pass',
  `http.server.ThreadingHTTPServer(("0.0.0.0", ${AGENT_PORT}), Agent).serve_forever()`,
].join('\n');

interface Order {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: string;
  /** One of the pod's own token files, sent as its bearer (the token never leaves the pod). */
  bearerFile?: string;
}
interface Outcome {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  error?: string;
}

interface Tenant {
  readonly team: Team;
  readonly python: HelloApp;
  /** A token of its ServiceAccount `developer`, bound to `edit` in its namespace (API server audience). */
  developerToken: string;
  developer: KubeConfig;
  /** A token of its ServiceAccount `owner`, bound to `admin` in its namespace. */
  ownerToken: string;
  /** An API key `ci` the owner minted through the management API. */
  apiKey: string;
  /** Every entry of every Secret `edit` reads in its namespace, by `<secret>/<entry>`. */
  secrets: Map<string, string>;
  pythonPod: V1Pod;
  echoPod: V1Pod;
  agentPod: V1Pod;
  /** An async run of its Python App, running for the whole suite. */
  longRunId: string;
  /** A finished sync run of its Python App. */
  doneRunId: string;
}

describe.skipIf(skipReason !== undefined)('one tenant against another on a real kubelet: every surface refused, nothing changed', { timeout: 4 * STATE_TIMEOUT_MS }, () => {
  let cluster: RealNodeCluster | undefined;
  const tenants = new Map<Team, Tenant>();
  const tenant = (team: Team) => tenants.get(team)!;

  /** An order carried out from inside `team`'s own pod. */
  const from = async (team: Team, order: Order): Promise<Outcome> => {
    const answer = await cluster!.node.fetchInside(`http://${tenant(team).agentPod.status!.podIP}:${AGENT_PORT}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(order),
    });
    if (answer.status !== 200) throw new Error(`the agent of ${team} answered ${answer.status}: ${await answer.text()}`);
    return (await answer.json()) as Outcome;
  };
  const bodyOf = (outcome: Outcome): Record<string, unknown> => JSON.parse(outcome.body ?? 'null') as Record<string, unknown>;
  /** Status and body, together, so that a failure shows why (toMatchObject on the status alone would hide it). */
  const statusOf = (outcome: Outcome) => ({ status: outcome.status, why: `${outcome.error ?? ''}${outcome.body?.slice(0, 600) ?? ''}` });
  const expectStatus = (outcome: Outcome, status: number) => expect(statusOf(outcome)).toEqual({ status, why: expect.any(String) });

  /** The management API as `token`, from this process (for reads of a tenant's state by its own owner). */
  const management = async (path: string, token: string, init: { method?: string; body?: unknown } = {}) => {
    const answer = await cluster!.node.fetchInside(`${MANAGEMENT}${path}`, {
      method: init.method ?? 'GET',
      headers: { authorization: `Bearer ${token}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: answer.status, body: (await answer.json().catch(() => null)) as Record<string, unknown> | null };
  };

  /** A call of a tenant's App from this process, at its pod's run port. */
  const callApp = async (pod: V1Pod, path: string, headers: Record<string, string>, body: string) => {
    const answer = await cluster!.node.fetchInside(`http://${pod.status!.podIP}:${SIDECAR_RUN_PORT}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    return { status: answer.status, runId: answer.headers.get('x-request-id'), body: await answer.text() };
  };

  /**
   * What a tenant has that another could change: read back by the cluster's admin and, for runs and keys, by the
   * tenant's own owner through the management API (the results store's rows).
   */
  const snapshot = async (team: Team) => {
    const { admin, core } = cluster!;
    const { ownerToken } = tenant(team);
    const runs: Record<string, unknown> = {};
    for (const app of ['hello', 'echo']) {
      const listed = await management(`/v2/projects/${team}/apps/${app}/runs?pageSize=100`, ownerToken);
      expect(listed.status, `${team}'s owner lists ${app}'s runs`).toBe(200);
      runs[app] = (listed.body!.items as RunRecord[])
        .map(({ id, projectId, appName, status, statusCode, reason, replica, startedAt, completedAt, error }) => ({ id, projectId, appName, status, statusCode, reason, replica, startedAt, completedAt, error }))
        .sort((a, b) => a.id.localeCompare(b.id));
    }
    const keys = await management(`/v2/projects/${team}/keys`, ownerToken);
    expect(keys.status, `${team}'s owner lists its keys`).toBe(200);
    const named = <T extends { metadata?: { name?: string } }>(items: T[]) => [...items].sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
    const networking = admin.makeApiClient(NetworkingV1Api);
    const custom = await Promise.all(['hello', 'echo'].map(async (name) => new HelloApp(admin, team, { name }).read()));
    const deployments = await Promise.all(['hello', 'echo'].map(async (name) => new HelloApp(admin, team, { name }).deployment()));
    return {
      runs,
      keys: keys.body!.items,
      serviceAccounts: named((await core.listNamespacedServiceAccount({ namespace: team })).items).map((account) => [account.metadata!.name, account.metadata!.uid]),
      roleBindings: named((await admin.makeApiClient(RbacAuthorizationV1Api).listNamespacedRoleBinding({ namespace: team })).items).map((binding) => [
        binding.metadata!.name,
        binding.metadata!.uid,
        binding.roleRef.name,
        binding.subjects,
      ]),
      secrets: named((await core.listNamespacedSecret({ namespace: team })).items).map((secret) => [secret.metadata!.name, secret.metadata!.uid, secret.data]),
      networkPolicies: named((await networking.listNamespacedNetworkPolicy({ namespace: team })).items).map((policy) => [policy.metadata!.name, policy.metadata!.uid, policy.spec]),
      // Not the Ready conditions: a probe that times out on a loaded machine flips them, whoever calls. Whether a
      // replica drains is asked of it where an attempt could drain it.
      apps: custom.map((app: App) => [app.metadata.name, app.metadata.generation, app.spec, app.status?.observedGeneration]),
      deployments: deployments.map((deployment) => [deployment?.metadata?.name, deployment?.metadata?.generation, deployment?.spec?.replicas]),
      pods: named((await core.listNamespacedPod({ namespace: team })).items).map((pod) => [pod.metadata!.name, pod.metadata!.uid, pod.status?.containerStatuses?.map((status) => status.restartCount)]),
    };
  };

  /** `team`'s pod of its own: made with its `edit` token, as its namespace's `runlet-sidecar`, labelled as its App `hello`. */
  const startAgentPod = async (team: Team, developer: KubeConfig): Promise<V1Pod> => {
    const projected = (name: string, audience: string) => ({ name, projected: { sources: [{ serviceAccountToken: { path: 'token', audience, expirationSeconds: 3600 } }] } });
    await developer.makeApiClient(CoreV1Api).createNamespacedPod({
      namespace: team,
      body: {
        metadata: { name: AGENT_POD, labels: { [APP_LABEL]: 'hello' } },
        spec: {
          serviceAccountName: 'runlet-sidecar',
          securityContext: { runAsNonRoot: true, runAsUser: PYTHON_RUNTIME_UID, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'agent',
              image: BUILT_IMAGES.pythonRuntime,
              imagePullPolicy: 'IfNotPresent',
              command: ['python3', '-c', AGENT],
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              // Never Ready, so that it never joins the App's Service (whose selector its label matches).
              readinessProbe: { tcpSocket: { port: 1 }, periodSeconds: 30 },
              volumeMounts: [
                { name: 'results', mountPath: `${TOKENS_DIR}/results`, readOnly: true },
                { name: 'run', mountPath: `${TOKENS_DIR}/run`, readOnly: true },
              ],
            },
          ],
          volumes: [projected('results', RESULTS_TOKEN_AUDIENCE), projected('run', RUN_AUDIENCE)],
        },
      },
    });
    const running = await wait(`${team}'s own pod running`, async () => {
      const pod = await cluster!.core.readNamespacedPod({ namespace: team, name: AGENT_POD });
      return pod.status?.phase === 'Running' && pod.status.podIP !== undefined && pod;
    });
    await wait(`${team}'s agent answering`, async () => {
      const answer = await cluster!.node
        .fetchInside(`http://${running.status!.podIP}:${AGENT_PORT}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ method: 'GET', url: `${MANAGEMENT}/healthz` }) })
        .catch(() => undefined);
      return answer?.status === 200;
    });
    return running;
  };

  /** A namespace's ServiceAccount `name`, bound to the built-in ClusterRole `role` there; its token (API server audience). */
  const accountWithRole = async (team: Team, name: string, role: string): Promise<string> => {
    const { admin, core } = cluster!;
    await core.createNamespacedServiceAccount({ namespace: team, body: { metadata: { name } } });
    await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: team,
      body: { metadata: { name }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects: [{ kind: 'ServiceAccount', name, namespace: team }] },
    });
    return requestToken(core, team, name, { expirationSeconds: 4 * 3600 });
  };

  const appPod = (team: Team, app: string) =>
    wait(`${team}/${app}'s pod Ready`, async () => {
      const pods = (await cluster!.core.listNamespacedPod({ namespace: team, labelSelector: `${APP_LABEL}=${app}` })).items.filter((pod) => pod.metadata!.name !== AGENT_POD);
      return pods.length === 1 && isReady(pods[0]!) && pods[0];
    });

  /** A tenant as a cluster admin enrols it and as it then sets itself up. */
  const setUpTenant = async (team: Team): Promise<Tenant> => {
    const { admin } = cluster!;
    // Its runs may last an hour (the long run below; the default bound is a minute).
    const python = new HelloApp(admin, team, { scaling: { responseGracePeriod: LONG_RUN_SECONDS } });
    await python.apply();
    await createEchoApp(admin, team, 'echo', ECHO_PORT);
    const developerToken = await accountWithRole(team, 'developer', 'edit');
    const ownerToken = await accountWithRole(team, 'owner', 'admin');
    const developer = cluster!.configWithToken(`${team}/developer`, developerToken);
    await wait(`${team}'s Apps Ready`, async () => readyAtGeneration(await python.read()) && readyAtGeneration(await new HelloApp(admin, team, { name: 'echo' }).read()), 2 * STATE_TIMEOUT_MS);
    const pythonPod = await appPod(team, 'hello');
    const echoPod = await appPod(team, 'echo');

    const expiresAt = new Date(Date.now() + 2 * 86_400_000).toISOString();
    const minted = await wait(`${team}'s API key minted once the owner's grant applies`, async () => {
      const answer = await management(`/v2/projects/${team}/keys`, ownerToken, { method: 'POST', body: { name: 'ci', expiresAt } });
      return answer.status === 201 && (answer.body as { token: string });
    });
    const key = { authorization: `Bearer ${minted.token}` };
    const done = await callApp(pythonPod, `/v4/${team}/hello/run`, key, JSON.stringify({ name: team }));
    expect(done.status, done.body).toBe(200);
    const echoed = await callApp(echoPod, `/v4/${team}/echo/greet`, key, '{}');
    expect(echoed.status, echoed.body).toBe(200);
    const long = await callApp(pythonPod, `/v4/${team}/hello/count?async=true`, key, JSON.stringify(LONG_RUN));
    expect(long.status, long.body).toBe(202);
    const longRunId = (JSON.parse(long.body) as { run_id: string }).run_id;
    await wait(`${team}'s runs listed by the management API`, async () => {
      const hello = await management(`/v2/projects/${team}/apps/hello/runs`, ownerToken);
      const echo = await management(`/v2/projects/${team}/apps/echo/runs`, ownerToken);
      const statusOfRun = (id: string | null) => (hello.body?.items as RunRecord[] | undefined)?.find((item) => item.id === id)?.status;
      return statusOfRun(longRunId) === 'running' && statusOfRun(done.runId) === 'success' && (echo.body?.items as RunRecord[] | undefined)?.length === 1;
    });

    const secrets = new Map<string, string>();
    for (const secret of (await developer.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: team })).items) {
      for (const [entry, value] of Object.entries(secret.data ?? {})) secrets.set(`${secret.metadata!.name}/${entry}`, Buffer.from(value, 'base64').toString('utf8'));
    }
    expect([...secrets.keys()], `${team}'s edit reads its hand-over and admin keys`).toEqual(expect.arrayContaining(['runlet-holder-key/key', 'runlet-admin-key/current']));
    const agentPod = await startAgentPod(team, developer);
    return { team, python, developerToken, developer, ownerToken, apiKey: minted.token, secrets, pythonPod, echoPod, agentPod, longRunId, doneRunId: done.runId! };
  };

  beforeAll(async () => {
    cluster = await startRealNodeCluster();
    // One after the other: two tenants' pods starting at once on a loaded 2-core machine only slow each other.
    for (const team of TEAMS) tenants.set(team, await setUpTenant(team));
  }, 30 * 60_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 5 * 60_000);

  afterEach((context) => {
    if (context.task.result?.state === 'fail') console.log(cluster?.diagnostics());
  });

  /** The key material a tenant reads in its own namespace: every Secret entry that could be a key or a token (one word, 32 bytes or more). */
  const keyMaterial = (team: Team) => [...tenant(team).secrets].map(([name, value]) => [name, value.trim()] as const).filter(([, value]) => value.length >= 32 && !/\s/.test(value));

  describe.each([
    ['team-a', 'team-b'],
    ['team-b', 'team-a'],
  ] as const)('%s against %s', (attacker, victim) => {
    it('the results collector: its own pod’s token writes nothing of the other’s (its path 403, its project or App refused, its run id a row of its own), and no Secret it reads is a key (401)', async () => {
      const before = await snapshot(victim);
      const victimRun = (await management(`/v2/projects/${victim}/apps/hello/runs/${tenant(victim).doneRunId}`, tenant(victim).ownerToken)).body!.item as RunRecord & { result?: unknown };
      const at = new Date().toISOString();
      const forged: RunRecord = { ...victimRun, status: 'failure', statusCode: 500, reason: null, error: { type: 'Forged', message: `by ${attacker}` }, replica: AGENT_POD, createdAt: at, startedAt: at, completedAt: at };
      delete (forged as { result?: unknown }).result;
      const post = (namespace: string, records: unknown[], bearer: Pick<Order, 'bearerFile' | 'headers'>) =>
        from(attacker, { method: 'POST', url: `${COLLECTOR}/${namespace}/runs`, ...bearer, headers: { 'content-type': 'application/json', ...bearer.headers }, body: JSON.stringify({ records }) });
      const ownToken = { bearerFile: RESULTS_TOKEN_FILE };

      const otherPath = await post(victim, [forged], ownToken);
      expectStatus(otherPath, 403);
      expect(bodyOf(otherPath).detail).toContain(`sends only namespace ${attacker}'s runs`);

      const otherProject = await post(attacker, [forged], ownToken);
      expectStatus(otherProject, 200);
      expect(bodyOf(otherProject)).toMatchObject({ received: 1, written: 0, refused: [{ index: 0, id: forged.id, reason: `of project ${victim}, not ${attacker}` }] });

      const otherApp = await post(attacker, [{ ...forged, projectId: attacker, appName: 'echo' }], ownToken);
      expect(bodyOf(otherApp)).toMatchObject({ written: 0, refused: [{ index: 0, reason: expect.stringContaining('of app echo, not hello') }] });

      // The same run id in its own project and App: taken, as a row of its own — the other's run is another row.
      const sameId = await post(attacker, [{ ...forged, projectId: attacker }], ownToken);
      expect(bodyOf(sameId)).toMatchObject({ received: 1, written: 1, refused: [] });
      const ownRow = await management(`/v2/projects/${attacker}/apps/hello/runs/${forged.id}`, tenant(attacker).ownerToken);
      expect(ownRow.body?.item).toMatchObject({ id: forged.id, projectId: attacker, status: 'failure', replica: AGENT_POD });

      // Every key it reads in its Secrets (the hand-over and admin keys, ServiceAccount token Secrets), as the bearer.
      for (const [name, value] of keyMaterial(attacker)) {
        const stolen = await post(attacker, [{ ...forged, projectId: attacker }], { headers: { authorization: `Bearer ${value}` } });
        expect([name, stolen.status]).toEqual([name, 401]);
        const stolenOther = await post(victim, [forged], { headers: { authorization: `Bearer ${value}` } });
        expect([name, stolenOther.status]).toEqual([name, 401]);
      }
      // Its pod's token for the run interface, and none at all.
      expect((await post(victim, [forged], { bearerFile: RUN_TOKEN_FILE })).status).toBe(401);
      expect((await post(victim, [forged], {})).status).toBe(401);

      expect(await snapshot(victim)).toEqual(before);
    });

    it('the management API: names that encode a path into the other namespace are 400 invalid-parameter before any review; its own token and key on the other’s routes 403', async () => {
      const before = await snapshot(victim);
      const owner = { authorization: `Bearer ${tenant(attacker).ownerToken}` };
      const encoded: Array<[method: string, path: string, parameter: string]> = [
        ['DELETE', `/v2/projects/${attacker}/keys/x%2F..%2F..%2F..%2F${victim}%2Fserviceaccounts%2Frunlet-key-ci`, 'key_name'],
        ['DELETE', `/v2/projects/${attacker}/keys/%2e%2e%2F%2e%2e%2F${victim}%2Fserviceaccounts%2Frunlet-key-ci`, 'key_name'],
        ['DELETE', `/v2/projects/${attacker}/keys/..%2F..%2F..%2F${victim}%2Fserviceaccounts%2Frunlet-key-ci`, 'key_name'],
        ['GET', `/v2/projects/${attacker}%2F..%2F${victim}/keys`, 'project_id'],
        ['GET', `/v2/projects/${attacker}/apps/x%2F..%2F..%2F${victim}%2Fapps%2Fhello/runs`, 'app_id'],
        ['GET', `/v2/projects/${attacker}/apps/hello/runs/x%2F..%2F..%2F..%2F..%2F${victim}%2Fapps%2Fhello%2Fruns%2F${tenant(victim).longRunId}`, 'run_id'],
        ['POST', `/v2/projects/${attacker}/apps/hello/runs/..%2F${tenant(victim).longRunId}/cancel`, 'run_id'],
      ];
      for (const [method, path, parameter] of encoded) {
        const answer = await from(attacker, { method, url: `${MANAGEMENT}${path}`, headers: owner });
        expect([path, statusOf(answer).status]).toEqual([path, 400]);
        expect(bodyOf(answer)).toMatchObject({ type: INVALID_PARAMETER, parameter });
      }
      const badName = await from(attacker, {
        method: 'POST',
        url: `${MANAGEMENT}/v2/projects/${attacker}/keys`,
        headers: { ...owner, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `../../${victim}/serviceaccounts/runlet-key-ci`, expiresAt: new Date(Date.now() + 86_400_000).toISOString() }),
      });
      expectStatus(badName, 400);
      expect(bodyOf(badName)).toMatchObject({ type: INVALID_PARAMETER });

      // Straight at the other's routes: its owner's token (admin at home) and its API key, 403.
      for (const credential of [tenant(attacker).ownerToken, tenant(attacker).apiKey]) {
        const headers = { authorization: `Bearer ${credential}` };
        for (const [method, path] of [
          ['GET', `/v2/projects/${victim}/keys`],
          ['DELETE', `/v2/projects/${victim}/keys/ci`],
          ['GET', `/v2/projects/${victim}/apps`],
          ['GET', `/v2/projects/${victim}/apps/hello/runs`],
          ['GET', `/v2/projects/${victim}/apps/hello/runs/${tenant(victim).doneRunId}`],
        ] as const) {
          const answer = await from(attacker, { method, url: `${MANAGEMENT}${path}`, headers });
          expect([method, path, statusOf(answer).status]).toEqual([method, path, 403]);
        }
      }
      expect(await snapshot(victim)).toEqual(before);
    });

    it('cancel and drain: the other’s running run and replicas stay as they are — cancel routes 403/404, its admin port 403 for every key it reads, /drain 409', async () => {
      const before = await snapshot(victim);
      const { longRunId, pythonPod, echoPod } = tenant(victim);
      const cancelPath = (team: Team) => `/v2/projects/${team}/apps/hello/runs/${longRunId}/cancel`;
      for (const credential of [tenant(attacker).developerToken, tenant(attacker).apiKey]) {
        const headers = { authorization: `Bearer ${credential}` };
        const there = await from(attacker, { method: 'POST', url: `${MANAGEMENT}${cancelPath(victim)}`, headers });
        expectStatus(there, 403);
      }
      // The other's run id under its own project, where its `edit` may cancel: no such run there (its custom App,
      // whose replicas the operator asks for a run it has no record of yet: its own pod is labelled as `hello`).
      const here = await from(attacker, { method: 'POST', url: `${MANAGEMENT}/v2/projects/${attacker}/apps/echo/runs/${longRunId}/cancel`, headers: { authorization: `Bearer ${tenant(attacker).developerToken}` } });
      expectStatus(here, 404);

      const admin = (pod: V1Pod, path: string) => `http://${pod.status!.podIP}:${SIDECAR_ADMIN_PORT}${path}`;
      const cancel = `/cancel/${longRunId}`;
      expectStatus(await from(attacker, { method: 'POST', url: admin(pythonPod, cancel) }), 403);
      for (const [name, key] of keyMaterial(attacker)) {
        const answer = await from(attacker, { method: 'POST', url: admin(pythonPod, cancel), headers: { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(key, 'POST', cancel) } });
        expect([name, answer.status]).toEqual([name, 403]);
      }
      for (const pod of [pythonPod, echoPod]) {
        for (const method of ['GET', 'POST']) {
          const drained = await from(attacker, { method, url: admin(pod, '/drain') });
          expect([pod.metadata!.name, method, drained.status]).toEqual([pod.metadata!.name, method, 409]);
        }
        // The drain token of earlier versions was a path segment: no such route is left.
        for (const [name, key] of keyMaterial(attacker)) {
          const old = await from(attacker, { method: 'GET', url: admin(pod, `/drain/${encodeURIComponent(key)}`) });
          expect([name, old.status]).toEqual([name, 404]);
        }
      }
      // Not draining: a drained replica answers 503 there.
      for (const pod of [pythonPod, echoPod]) expectStatus(await from(attacker, { method: 'GET', url: admin(pod, '/ready') }), 200);
      expect(await snapshot(victim)).toEqual(before);
    });

    it('ports: the other’s custom app and Python runtime are closed on its pod IP (they listen on 127.0.0.1); its admin port’s counts name nothing of it; its run port wants a token', async () => {
      const before = await snapshot(victim);
      const { pythonPod, echoPod, longRunId, doneRunId } = tenant(victim);
      const custom = await from(attacker, { method: 'POST', url: `http://${echoPod.status!.podIP}:${ECHO_PORT}/greet`, headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(custom).toMatchObject({ error: expect.stringMatching(/Connection refused/) });
      const runtime = await from(attacker, { method: 'POST', url: `http://${pythonPod.status!.podIP}:${PYTHON_RUNTIME_PORT}/run`, headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(runtime).toMatchObject({ error: expect.stringMatching(/Connection refused/) });

      // The per-App NetworkPolicy admits only the sidecar's ports; this tier's CNI does not enforce it, so the
      // admin port answers any pod here — with counts under fixed labels only.
      const policies = (await cluster!.admin.makeApiClient(NetworkingV1Api).listNamespacedNetworkPolicy({ namespace: victim })).items;
      for (const app of ['hello', 'echo']) {
        const policy = policies.find((candidate) => candidate.spec?.podSelector?.matchLabels?.[APP_LABEL] === app);
        expect(policy, `${victim}/${app}'s NetworkPolicy`).toBeDefined();
        const ports = policy!.spec!.ingress!.flatMap((rule) => rule.ports ?? []).map((port) => port.port);
        expect(new Set(ports)).toEqual(new Set([SIDECAR_RUN_PORT, SIDECAR_ADMIN_PORT]));
      }
      for (const pod of [pythonPod, echoPod]) {
        for (const path of ['/metrics', '/load']) {
          const read = await from(attacker, { method: 'GET', url: `http://${pod.status!.podIP}:${SIDECAR_ADMIN_PORT}${path}` });
          expectStatus(read, 200);
          for (const secret of [victim, 'hello', 'echo', longRunId, doneRunId]) expect([path, read.body!.includes(secret)]).toEqual([path, false]);
        }
        const anonymous = await from(attacker, { method: 'POST', url: `http://${pod.status!.podIP}:${SIDECAR_RUN_PORT}/v4/${victim}/${pod === echoPod ? 'echo' : 'hello'}/run`, headers: { 'content-type': 'application/json' }, body: '{}' });
        expectStatus(anonymous, 401);
      }
      expect(await snapshot(victim)).toEqual(before);
    });

    it('the hand-over header and hold control: signed with any key it reads, the other’s sidecars ask for a token (401) and choose their own run id, the activator refuses (403); at home the same header is taken', async () => {
      const before = await snapshot(victim);
      for (const [app, pod] of [
        ['hello', tenant(victim).pythonPod],
        ['echo', tenant(victim).echoPod],
      ] as const) {
        const path = `/v4/${victim}/${app}/run`;
        const body = '{"name":"held"}';
        for (const [name, key] of keyMaterial(attacker)) {
          const chosen = newRunId();
          const header = verifiedHeldRunHeader(holderKeyFromText(key), { runId: chosen, coldStartMs: 5 }, { method: 'POST', url: path }, Buffer.from(body));
          const answer = await from(attacker, { method: 'POST', url: `http://${pod.status!.podIP}:${SIDECAR_RUN_PORT}${path}`, headers: { 'content-type': 'application/json', [HELD_RUN_HEADER]: header }, body });
          expect([name, path, answer.status]).toEqual([name, path, 401]);
          // With its own API key as the caller, the header bound to it: the key is refused there anyway (403).
          const authorization = `Bearer ${tenant(attacker).apiKey}`;
          const relayed = heldRunHeader(holderKeyFromText(key), { runId: chosen, coldStartMs: 5 }, { method: 'POST', url: path, authorization }, null);
          const keyed = await from(attacker, { method: 'POST', url: `http://${pod.status!.podIP}:${SIDECAR_RUN_PORT}${path}`, headers: { 'content-type': 'application/json', authorization, [HELD_RUN_HEADER]: relayed }, body });
          expect([name, path, keyed.status]).toEqual([name, path, 403]);
          expect(keyed.headers?.['x-request-id']).not.toBe(chosen);
        }
      }

      const activators = (await cluster!.core.listNamespacedPod({ namespace: OPERATOR_NAMESPACE, labelSelector: 'app.kubernetes.io/component=activator' })).items.filter(isReady);
      expect(activators.length).toBeGreaterThan(0);
      for (const activator of activators) {
        for (const [method, path] of [
          ['GET', holdControlPath(victim, 'hello')],
          ['POST', holdControlPath(victim, 'hello', tenant(victim).longRunId)],
          ['POST', holdControlPath(victim, 'hello', tenant(victim).longRunId, 'forget')],
        ] as const) {
          const url = `http://${activator.status!.podIP}:${HOLDER_PORT}${path}`;
          expect([path, (await from(attacker, { method, url })).status]).toEqual([path, 403]);
          for (const [name, key] of keyMaterial(attacker)) {
            const signed = await from(attacker, { method, url, headers: { [HOLD_CONTROL_HEADER]: signHoldControl(holderKeyFromText(key), method, path, Date.now()) } });
            expect([name, path, signed.status]).toEqual([name, path, 403]);
          }
        }
        // The control key, which only the operator and the activators read, is taken there: the route is live.
        const control = await cluster!.core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: 'runlet-holder-control' });
        const controlKey = holderKeyFromText(Buffer.from(control.data!.key!, 'base64').toString('utf8'));
        const path = holdControlPath(victim, 'hello');
        const listed = await from(attacker, { method: 'GET', url: `http://${activator.status!.podIP}:${HOLDER_PORT}${path}`, headers: { [HOLD_CONTROL_HEADER]: signHoldControl(controlKey, 'GET', path, Date.now()) } });
        expectStatus(listed, 200);
      }

      // At home, the same kind of header with its own key is taken: the run id it chose, without a token.
      const home = `/v4/${attacker}/hello/run`;
      const chosen = newRunId();
      const body = '{"name":"home"}';
      const header = verifiedHeldRunHeader(holderKeyFromText(tenant(attacker).secrets.get('runlet-holder-key/key')!), { runId: chosen, coldStartMs: 5 }, { method: 'POST', url: home }, Buffer.from(body));
      const taken = await from(attacker, { method: 'POST', url: `http://${tenant(attacker).pythonPod.status!.podIP}:${SIDECAR_RUN_PORT}${home}`, headers: { 'content-type': 'application/json', [HELD_RUN_HEADER]: header }, body });
      expectStatus(taken, 200);
      expect(taken.headers?.['x-request-id']).toBe(chosen);
      expect(await snapshot(victim)).toEqual(before);
    });

    it('its API key: 403 on the other’s Apps (Python and custom) and management routes; no credential for the API server (401, kubectl refused); its pod’s tokens 401/403 there too', async () => {
      const before = await snapshot(victim);
      const key = `Bearer ${tenant(attacker).apiKey}`;
      for (const [app, pod] of [
        ['hello', tenant(victim).pythonPod],
        ['echo', tenant(victim).echoPod],
      ] as const) {
        const url = `http://${pod.status!.podIP}:${SIDECAR_RUN_PORT}/v4/${victim}/${app}/run`;
        const keyed = await from(attacker, { method: 'POST', url, headers: { 'content-type': 'application/json', authorization: key }, body: '{}' });
        expectStatus(keyed, 403);
        expect(bodyOf(keyed).detail).toContain(`The token is for project "${attacker}", not for "${victim}"`);
        const runToken = await from(attacker, { method: 'POST', url, headers: { 'content-type': 'application/json' }, bearerFile: RUN_TOKEN_FILE, body: '{}' });
        expectStatus(runToken, 403);
        const apiServerToken = await from(attacker, { method: 'POST', url, headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant(attacker).developerToken}` }, body: '{}' });
        expectStatus(apiServerToken, 401);
        const asyncList = await from(attacker, { method: 'GET', url: `${MANAGEMENT}/v2/projects/${victim}/apps/${app}/runs`, headers: { authorization: key } });
        expectStatus(asyncList, 403);
      }

      // The API server takes it for nothing (its audience is Runlet's alone): not its own namespace, not another.
      const { controlPlane } = cluster!;
      const kubeconfig = join(controlPlane.dir, `${attacker}-api-key.kubeconfig`);
      await writeFile(
        kubeconfig,
        toYaml({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'tier', cluster: { server: controlPlane.server, 'certificate-authority': controlPlane.caFile } }],
          users: [{ name: 'ci', user: { token: tenant(attacker).apiKey } }],
          contexts: [{ name: 'ci', context: { cluster: 'tier', user: 'ci', namespace: attacker } }],
          'current-context': 'ci',
        }),
      );
      for (const namespace of [attacker, victim]) {
        const refused = await run(controlPlane.kubectl, ['--kubeconfig', kubeconfig, 'get', 'pods', '--namespace', namespace]).then(
          () => 'accepted',
          (error: { stderr?: string }) => error.stderr ?? '',
        );
        expect(refused).toMatch(/Unauthorized|must be logged in/);
      }
      expect(await snapshot(victim)).toEqual(before);
    });

    it('its `edit` ServiceAccount reads and writes nothing of the other’s or of Runlet’s release namespace: Secrets, Apps, scale, pods, tokens, RoleBindings (403); its `admin` cannot enrol itself', async () => {
      const before = await snapshot(victim);
      const asDeveloper = new KubeApi(kubeConfigCredentials(tenant(attacker).developer));
      const asOwner = new KubeApi(kubeConfigCredentials(cluster!.configWithToken(`${attacker}/owner`, tenant(attacker).ownerToken)));
      const ns = (team: string, rest: string) => kubePathOf(`/api/v1/namespaces/${team}/${rest}`);
      const apis = (group: string, team: string, rest: string) => kubePathOf(`/apis/${group}/namespaces/${team}/${rest}`);
      try {
        const attempts: Array<[string, () => Promise<unknown>]> = [
          ['get the other’s hand-over key', () => asDeveloper.get(ns(victim, 'secrets/runlet-holder-key'))],
          ['get the other’s admin key', () => asDeveloper.get(ns(victim, 'secrets/runlet-admin-key'))],
          ['list the other’s Secrets', () => asDeveloper.list(ns(victim, 'secrets'))],
          ['get the control key', () => asDeveloper.get(ns(OPERATOR_NAMESPACE, 'secrets/runlet-holder-control'))],
          ['get the results store’s DSN', () => asDeveloper.get(ns(OPERATOR_NAMESPACE, 'secrets/runlet-postgres'))],
          ['list the release namespace’s Secrets', () => asDeveloper.list(ns(OPERATOR_NAMESPACE, 'secrets'))],
          ['list the held calls', () => asDeveloper.list(ns('runlet-system-held', 'secrets'))],
          ['patch the operator’s configuration', () => asDeveloper.mergePatch(ns(OPERATOR_NAMESPACE, 'configmaps/runlet-operator'), { data: { 'operator.yaml': '{}' } })],
          ['read the other’s App', () => asDeveloper.get(apis('runlet.dev/v1alpha1', victim, 'apps/hello'))],
          ['patch the other’s App', () => asDeveloper.mergePatch(apis('runlet.dev/v1alpha1', victim, 'apps/hello'), { spec: { scaling: { minReplicas: 0 } } })],
          ['scale the other’s Deployment', () => asDeveloper.mergePatch(apis('apps/v1', victim, 'deployments/hello/scale'), { spec: { replicas: 0 } })],
          ['list the other’s pods', () => asDeveloper.list(ns(victim, 'pods'))],
          ['delete the other’s pod', () => asDeveloper.delete(ns(victim, `pods/${tenant(victim).pythonPod.metadata!.name}`))],
          ['a token of the other’s sidecar', () => asDeveloper.create(ns(victim, 'serviceaccounts/runlet-sidecar/token'), { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: [RESULTS_TOKEN_AUDIENCE] } } as unknown as KubeObject)],
          ['a token of the other’s API key', () => asDeveloper.create(ns(victim, 'serviceaccounts/runlet-key-ci/token'), { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: [RUN_AUDIENCE] } } as unknown as KubeObject)],
          ['delete the other’s enrolment', () => asDeveloper.delete(apis('rbac.authorization.k8s.io/v1', victim, 'rolebindings/runlet-operator-tenant'))],
          ['the other’s RunLogs', () => asDeveloper.list(apis('runlet.dev/v1alpha1', victim, 'runlogs'))],
          ['the operator’s pods', () => asDeveloper.list(ns(OPERATOR_NAMESPACE, 'pods'))],
          ['edit binds Runlet’s tenant role at home', () => asDeveloper.create(apis('rbac.authorization.k8s.io/v1', attacker, 'rolebindings'), tenantRoleBinding(attacker))],
          ['admin binds Runlet’s tenant role at home', () => asOwner.create(apis('rbac.authorization.k8s.io/v1', attacker, 'rolebindings'), tenantRoleBinding(attacker))],
          ['admin binds it in the other namespace', () => asOwner.create(apis('rbac.authorization.k8s.io/v1', victim, 'rolebindings'), tenantRoleBinding(victim))],
        ];
        for (const [what, attempt] of attempts) expect([what, await kubeStatusOf(attempt())]).toEqual([what, 403]);
      } finally {
        await asDeveloper.close();
        await asOwner.close();
      }
      expect(await snapshot(victim)).toEqual(before);
    });
  });

  it('each tenant’s own credentials do at home what was refused abroad: its key calls its Apps, its `edit` cancels its running run', async () => {
    for (const team of TEAMS) {
      const { apiKey, developerToken, pythonPod, echoPod, longRunId } = tenant(team);
      const key = { authorization: `Bearer ${apiKey}` };
      expect((await callApp(pythonPod, `/v4/${team}/hello/run`, key, '{"name":"home"}')).status).toBe(200);
      expect((await callApp(echoPod, `/v4/${team}/echo/greet`, key, '{}')).status).toBe(200);
      const cancelled = await from(team, { method: 'POST', url: `${MANAGEMENT}/v2/projects/${team}/apps/hello/runs/${longRunId}/cancel`, headers: { authorization: `Bearer ${developerToken}` } });
      expectStatus(cancelled, 202);
      await wait(`${team}'s run ${longRunId} cancelled`, async () => {
        const answer = await management(`/v2/projects/${team}/apps/hello/runs/${longRunId}`, tenant(team).ownerToken);
        return (answer.body?.item as RunRecord | undefined)?.status === 'cancelled';
      });
    }
  });
});

/** A RoleBinding of Runlet's tenant ClusterRole (what enrols a namespace) to the namespace's default ServiceAccount. */
function tenantRoleBinding(namespace: string): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'self-enrolment', namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-operator-tenant' },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace }],
  } as unknown as KubeObject;
}
