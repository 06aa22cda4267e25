// The images `make images` builds, run as a cluster would run them: under the securityContext, emptyDirs and
// code volume the operator renders (pod-containers.ts), started through testcontainers (container-api.ts).
// The Runlet image's CLI, the Python runtime with examples/hello mounted answering on its loopback, and both as
// one pod: `runlet sidecar --run-store sqlite` in front of the runtime, called over the pod's loopback.
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PYTHON_RUNTIME_IMAGE, DEFAULT_RUNLET_IMAGE } from '../../cli/images.ts';
import { renderDeployment } from '../../operator/render/deployment.ts';
import { PYTHON_RUNTIME_UID, SIDECAR_UID } from '../../operator/render/pod-security.ts';
import { IMAGE_JEMALLOC_PATH } from '../../operator/render/sidecar-container.ts';
import { APP_CONTAINER, DATA_DIR, PYTHON_RUNTIME_PORT, SIDECAR_ADMIN_PORT, SIDECAR_CONTAINER, SIDECAR_RUN_PORT } from '../../operator/render/names.ts';
import { pythonSpec, renderConfig, storedApp } from '../support/operator-apps.ts';
import { waitFor } from '../support/wait.ts';
import { startContainerApi, type ContainerApi } from './container-api.ts';
import { BUILD_TIMEOUT_MS, buildImages, imageEngine, imageSizeBytes, imageUser } from './images.ts';
import { podContainers, startPod, type RunningPod } from './pod-containers.ts';

const HELLO_DIR = resolve(import.meta.dirname, '../../examples/hello');
const NAMESPACE = 'team-a';
/** Containers start in about a second; a loaded 2-core machine and a cold engine take longer. */
const START_TIMEOUT_MS = 60_000;

const found = imageEngine();
const skipReason = 'skipReason' in found ? found.skipReason : undefined;
if (skipReason !== undefined) console.log(`container images: skipped, ${skipReason}`);

describe.skipIf(skipReason !== undefined)('the container images', { timeout: START_TIMEOUT_MS * 2 }, () => {
  const engine = 'engine' in found ? found.engine : 'podman';
  let api: ContainerApi;
  const pods: RunningPod[] = [];

  beforeAll(async () => {
    const { seconds } = await buildImages();
    console.log(`images built (or found current) in ${seconds.toFixed(1)} s`);
    api = await startContainerApi(engine);
  }, BUILD_TIMEOUT_MS);

  afterAll(async () => {
    for (const pod of pods) await pod.stop();
    await api?.stop();
  }, START_TIMEOUT_MS);

  /** The hello App's pod as the operator renders it, on the images just built, auth off (no API server here). */
  function helloPod(args?: Record<string, (args: string[]) => string[]>) {
    const app = storedApp(pythonSpec({ auth: { enabled: false } }), { namespace: NAMESPACE });
    const config = renderConfig({ sidecarImage: DEFAULT_RUNLET_IMAGE, pythonRuntimeImage: DEFAULT_PYTHON_RUNTIME_IMAGE });
    const deployment = renderDeployment(app, config, { codeHash: undefined });
    return podContainers(deployment, { configMapDirs: { code: HELLO_DIR }, podName: 'hello-7d9f-abcde', namespace: NAMESPACE, ...(args ? { args } : {}) });
  }

  async function start(containers: ReturnType<typeof helloPod>): Promise<RunningPod> {
    const pod = await startPod(containers);
    pods.push(pod);
    return pod;
  }

  it('are small: reports each image size', async () => {
    for (const image of [DEFAULT_RUNLET_IMAGE, DEFAULT_PYTHON_RUNTIME_IMAGE]) {
      const bytes = await imageSizeBytes(engine, image);
      console.log(`${image}: ${(bytes / 1e6).toFixed(0)} MB`);
      // Bounds that catch a dev dependency or a build tree slipping into the image, not a few MB of drift.
      expect(bytes).toBeLessThan(image === DEFAULT_RUNLET_IMAGE ? 400e6 : 200e6);
    }
  });

  it('carry, as their USER, the numeric users the operator renders as runAsUser', async () => {
    // The operator renders runAsUser explicitly; `docker run` and a hand-written pod get the image's USER. One
    // user for both, so the image behaves the same under either (the runtime's home is made for 10001).
    expect((await imageUser(engine, DEFAULT_RUNLET_IMAGE)).split(':')[0]).toBe(String(SIDECAR_UID));
    expect((await imageUser(engine, DEFAULT_PYTHON_RUNTIME_IMAGE)).split(':')[0]).toBe(String(PYTHON_RUNTIME_UID));
  });

  it('the Runlet image runs `runlet --help` and `runlet sidecar --help` as the sidecar runs: UID 1000, read-only root, no capabilities', async () => {
    const sidecar = helloPod().find(({ name }) => name === SIDECAR_CONTAINER)!;
    // The rendered securityContext, with a command that stays up so the CLI can be run beside it.
    const pod = await start([{ name: SIDECAR_CONTAINER, container: sidecar.container.withEntrypoint(['sleep']).withCommand(['infinity']) }]);
    const help = await pod.exec(SIDECAR_CONTAINER, ['runlet', '--help']);
    expect(help).toMatch(/^ {2}sidecar +Serve the run interface/m);
    expect(help).toMatch(/^ {2}operator +Reconcile App resources/m);
    expect(await pod.exec(SIDECAR_CONTAINER, ['runlet', 'sidecar', '--help'])).toMatch(/--run-store/);
    expect((await pod.exec(SIDECAR_CONTAINER, ['id'])).trim()).toBe('uid=1000(node) gid=1000(node) groups=1000(node)');
    // The read-only root refuses writes; the /tmp emptyDir takes them.
    const write = await pod.container(SIDECAR_CONTAINER).exec(['touch', '/opt/runlet/probe']);
    expect(write.exitCode).not.toBe(0);
    expect(write.output).toMatch(/Read-only file system/);
    await pod.exec(SIDECAR_CONTAINER, ['touch', '/tmp/probe']);
    // Nor anywhere else the pod renders no volume (the engine's own tmpfs there are masked: pod-containers.ts).
    expect((await pod.container(SIDECAR_CONTAINER).exec(['touch', '/var/tmp/probe'])).output).toMatch(/Read-only file system/);
    // Every capability dropped: the effective set is empty.
    expect(await pod.exec(SIDECAR_CONTAINER, ['grep', 'CapEff', '/proc/self/status'])).toMatch(/CapEff:\s+0000000000000000/);
  });

  it('the Python runtime image starts `python -m runlet_runtime` on examples/hello, as the app container, and answers on its loopback', async () => {
    const app = helloPod().find(({ name }) => name === APP_CONTAINER)!;
    const pod = await start([app]);
    const call = `import json, urllib.request as u
r = u.urlopen(u.Request("http://127.0.0.1:${PYTHON_RUNTIME_PORT}/run", data=json.dumps({"name": "Ada"}).encode(), method="POST"))
print(json.dumps({"status": r.status, "body": json.load(r)}))`;
    const answer = await waitFor(() => pod.exec(APP_CONTAINER, ['python', '-c', call]), { what: 'the runtime answering /run', timeoutMs: START_TIMEOUT_MS, intervalMs: 250 });
    expect(JSON.parse(answer)).toEqual({ status: 200, body: { greeting: 'Hello, Ada!' } });
    expect((await pod.exec(APP_CONTAINER, ['id', '-u'])).trim()).toBe('10001');
  });

  it('as one pod: `runlet sidecar --run-store sqlite` in front of the runtime serves sync and stream calls over the pod loopback, recording runs in its emptyDir', async () => {
    const containers = helloPod({ [SIDECAR_CONTAINER]: (args) => withOption(args, '--run-store', 'sqlite') });
    const pod = await start(containers);
    const fetchInSidecar = (path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
      pod.exec(SIDECAR_CONTAINER, [
        'node',
        '-e',
        `const [url, init] = JSON.parse(process.argv[1]);
         fetch(url, init).then(async (r) => console.log(JSON.stringify({ status: r.status, body: await r.text() })), (e) => { console.error(e); process.exit(1); });`,
        JSON.stringify([`http://127.0.0.1:${path}`, { method: init.method ?? 'GET', headers: init.headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) }]),
      ]).then((out) => JSON.parse(out) as { status: number; body: string });

    await waitFor(async () => (await fetchInSidecar(`${SIDECAR_ADMIN_PORT}/ready`)).status === 200, { what: 'the sidecar ready (its runtime answering)', timeoutMs: START_TIMEOUT_MS, intervalMs: 250 });

    const sync = await fetchInSidecar(`${SIDECAR_RUN_PORT}/v4/${NAMESPACE}/hello/run`, { method: 'POST', body: { name: 'Ada' }, headers: { 'content-type': 'application/json' } });
    expect(sync.status).toBe(200);
    expect(JSON.parse(sync.body)).toMatchObject({ result: { greeting: 'Hello, Ada!' } });

    const stream = await fetchInSidecar(`${SIDECAR_RUN_PORT}/v4/${NAMESPACE}/hello/count`, { method: 'POST', body: { n: 3, pause: 0 }, headers: { 'content-type': 'application/json', accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    const events = stream.body.split('\n').filter((line) => line.startsWith('data: ')).map((line) => JSON.parse(line.slice('data: '.length)) as unknown);
    expect(events).toEqual([1, 2, 3].map((item) => ({ item, of: 3 })));

    // The runs are in the sidecar's SQLite store, on the data emptyDir (the root is read-only).
    expect(await pod.exec(SIDECAR_CONTAINER, ['ls', DATA_DIR])).toMatch(/\.sqlite/);
    // The allocator the operator preloads into the sidecar (operator/render/sidecar-container.ts) is in the image,
    // and in the sidecar's process.
    const jemalloc = (await pod.exec(SIDECAR_CONTAINER, ['readlink', '-e', IMAGE_JEMALLOC_PATH])).trim();
    expect(jemalloc).toMatch(/\/libjemalloc\.so\.2$/);
    expect(await pod.exec(SIDECAR_CONTAINER, ['cat', '/proc/1/maps'])).toContain(jemalloc);
  });
});

/** args with `--name value` replaced (or added). */
function withOption(args: string[], name: string, value: string): string[] {
  const at = args.indexOf(name);
  return at === -1 ? [...args, name, value] : [...args.slice(0, at + 1), value, ...args.slice(at + 2)];
}
