// Issue #31, the shared keys: what a tenant with `edit` in team-a can read (its namespace's Secrets, its pod
// specs) is worth nothing against team-b. The operator's real key management (SidecarRbacApplier with the
// admin keys, the control key) on the in-memory API server; team-b's real sidecar surfaces: the run port (the
// hand-over header), the admin port (drain, cancel) and a holder's control routes, each tried with everything
// team-a holds, and each refused with nothing changed.
import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Secret } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerHoldControl, HeldCallIndex, HOLD_CONTROL_HEADER, holdControlPath, signHoldControl } from '../../activator/hold-control.ts';
import { noRuns } from '../../docs/openapi-documents.ts';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { AdminKeys } from '../../operator/admin-keys.ts';
import { ensureHolderKey } from '../../operator/autoscaling/holder-key.ts';
import { SidecarRbacApplier } from '../../operator/sidecar-rbac.ts';
import { HELD_RUN_HEADER, heldRunHeader, holderKeyFromText } from '../../run-request/auth/held-run.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { ADMIN_SIGNATURE_HEADER, readAdminKeys, signAdminRequest } from '../../sidecar/admin-cancel.ts';
import { createAdminInterface, createAdminServer } from '../../sidecar/admin-interface.ts';
import { AppRegistry, AppTarget } from '../../sidecar/apps.ts';
import { podTermination } from '../../sidecar/pod-termination.ts';
import { Replica } from '../../sidecar/replica.ts';
import { createRunInterface } from '../../sidecar/run-interface.ts';
import { createRunServer } from '../../sidecar/run-server.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { pythonSpec, storedApp } from '../support/operator-apps.ts';
import { kubePathOf } from '../support/kube-path.ts';

const RELEASE = 'runlet-system';
const CONTROL = { namespace: RELEASE, name: 'runlet-holder-control' };
const logger = pino({ level: 'silent' });

let server: KubeApiServer;
let api: KubeApi;
/** What a tenant with `edit` in a namespace reads there: every entry of every Secret, as text. */
const secretsOf = async (namespace: string): Promise<Map<string, string>> => {
  const entries = new Map<string, string>();
  for (const secret of (await api.list<V1Secret & KubeObject>(kubePathOf(`/api/v1/namespaces/${namespace}/secrets`))).items) {
    for (const [key, value] of Object.entries(secret.data ?? {})) entries.set(`${secret.metadata?.name}/${key}`, Buffer.from(value, 'base64').toString('utf8'));
  }
  return entries;
};
let teamA: Map<string, string>;
let teamB: Map<string, string>;

/** team-b's sidecar: its run port (its namespace's hand-over key) and its admin port (its mounted admin key). */
const closers: (() => Promise<void>)[] = [];
let runOrigin: string;
let adminOrigin: string;
let replica: Replica;

async function listen(http: Server): Promise<string> {
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  closers.push(async () => {
    http.closeAllConnections();
    await new Promise((resolveClose) => http.close(resolveClose));
  });
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  server = await startKubeApiServer({ namespaces: [RELEASE, 'team-a', 'team-b'] });
  api = new KubeApi(await server.credentials(), { fieldManager: 'runlet-operator' });
  const apps = [storedApp(pythonSpec(), { namespace: 'team-a', uid: 'uid-a' }), storedApp(pythonSpec(), { namespace: 'team-b', uid: 'uid-b' })];
  const applier = new SidecarRbacApplier({ api, appsIn: (namespace) => apps.filter((app) => app.metadata.namespace === namespace), logger, holderKeys: true, adminKeys: new AdminKeys({ api }) });
  await applier.ensure('team-a');
  await applier.ensure('team-b');
  await ensureHolderKey(api, CONTROL);
  teamA = await secretsOf('team-a');
  teamB = await secretsOf('team-b');

  const registry = new AppRegistry();
  registry.add(new AppTarget({ projectId: 'team-b', appName: 'hello', runtime: 'python', replicaConcurrency: 1, responseGracePeriodSeconds: 5 }));
  replica = new Replica({ apps: registry, store: noRuns, replicaName: 'hello-b-1', logger, holderKey: holderKeyFromText(teamB.get('runlet-holder-key/key')!) });
  // team-b's pod, not being deleted; its admin key Secret as the kubelet mounts it.
  await api.create(kubePathOf('/api/v1/namespaces/team-b/pods'), { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'hello-b-1', namespace: 'team-b' }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } as KubeObject);
  const adminKeyDir = await mkdtemp(join(tmpdir(), 'runlet-team-b-admin-key-'));
  for (const entry of ['current', 'previous']) {
    const value = teamB.get(`runlet-admin-key/${entry}`);
    if (value !== undefined) await writeFile(join(adminKeyDir, entry), value);
  }
  runOrigin = await listen(createRunServer(createRunInterface(replica), logger));
  adminOrigin = await listen(
    createAdminServer(
      createAdminInterface(replica, {
        drain: { pod: podTermination(async () => api, 'team-b', 'hello-b-1') },
        cancels: { projectId: 'team-b', appName: 'hello', keys: () => readAdminKeys(adminKeyDir) },
      }),
    ),
  );
});

afterAll(async () => {
  for (const close of closers) await close();
  await replica?.deliverer.close();
  await api?.close();
  await server?.close();
});

describe('the keys a tenant can read, against another tenant', () => {
  it('are its namespace’s own, random: none equals team-b’s, and the release namespace holds no root, only the control key no tenant reads', async () => {
    expect([...teamA.keys()].sort()).toEqual(['runlet-admin-key/current', 'runlet-holder-key/key']);
    for (const [name, value] of teamA) expect([name, value]).not.toEqual([name, teamB.get(name)]);
    const release = (await api.list<V1Secret & KubeObject>(kubePathOf(`/api/v1/namespaces/${RELEASE}/secrets`))).items.map((secret) => secret.metadata?.name);
    expect(release).toEqual([CONTROL.name]);
  });

  it('the hand-over header: signed with team-a’s key, team-b’s sidecar takes no word of it (a fresh run id); signed with team-b’s, it does', async () => {
    const url = '/v4/team-b/hello/run';
    const send = async (key: string): Promise<{ chosen: string; got: string | null }> => {
      const chosen = newRunId();
      const header = heldRunHeader(holderKeyFromText(key), { runId: chosen, coldStartMs: 5 }, { method: 'POST', url, authorization: undefined }, null);
      const answer = await fetch(`${runOrigin}${url}`, { method: 'POST', headers: { [HELD_RUN_HEADER]: header, 'content-type': 'application/json' }, body: '{}' });
      await answer.arrayBuffer();
      return { chosen, got: answer.headers.get('x-request-id') };
    };
    for (const key of teamA.values()) {
      if (!/^[0-9a-f]{64}$/.test(key)) continue;
      const { chosen, got } = await send(key);
      expect(got).toMatch(/^[0-9a-f-]{36}$/);
      expect(got, 'team-a’s key chose no run id of team-b').not.toBe(chosen);
    }
    const own = await send(teamB.get('runlet-holder-key/key')!);
    expect(own.got, 'the control: team-b’s own key is taken').toBe(own.chosen);
  });

  it('cancel: signed with any key team-a holds, team-b’s admin port refuses it (403); signed with team-b’s admin key it is taken (404: no such run in flight)', async () => {
    const path = `/cancel/${newRunId()}`;
    for (const [name, key] of teamA) {
      const refused = await fetch(`${adminOrigin}${path}`, { method: 'POST', headers: { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(key, 'POST', path) } });
      expect([name, refused.status]).toEqual([name, 403]);
    }
    const own = await fetch(`${adminOrigin}${path}`, { method: 'POST', headers: { [ADMIN_SIGNATURE_HEADER]: signAdminRequest(teamB.get('runlet-admin-key/current')!, 'POST', path) } });
    expect(own.status).toBe(404);
  });

  it('drain: nothing team-a holds drains team-b’s replica while its pod is not being deleted (409), and it stays ready to serve', async () => {
    for (const path of ['/drain', ...[...teamA.values()].map((key) => `/drain/${key}`)]) {
      const refused = await fetch(`${adminOrigin}${path}`, { method: 'POST' });
      expect([path === '/drain' ? path : '/drain/<key>', refused.status]).toEqual([path === '/drain' ? path : '/drain/<key>', path === '/drain' ? 409 : 404]);
    }
    expect(replica.draining).toBe(false);
  });

  it('hold control: a holder refuses requests signed with any key team-a holds (403); the control key, which no tenant reads, is taken', async () => {
    const control = await ensureHolderKey(api, CONTROL);
    const holder = createServer((request, response) => answerHoldControl(request, response, { key: control, index: new HeldCallIndex(), identity: 'activator-0' }));
    const origin = await listen(holder);
    const path = holdControlPath('team-b', 'hello');
    for (const [name, key] of teamA) {
      const refused = await fetch(`${origin}${path}`, { headers: { [HOLD_CONTROL_HEADER]: signHoldControl(holderKeyFromText(key), 'GET', path, Date.now()) } });
      expect([name, refused.status]).toEqual([name, 403]);
    }
    const own = await fetch(`${origin}${path}`, { headers: { [HOLD_CONTROL_HEADER]: signHoldControl(control, 'GET', path, Date.now()) } });
    expect(own.status).toBe(200);
  });
});
