// The in-memory API server of test/kube, with the Runlet CRDs and App `hello` (keepFinished from argv), as a
// child process of the RunLog store benchmark: there, its handling of each status patch of up to 1 MiB (parse,
// merge, schema validation) would block the event loop the benchmark measures, and count in its CPU time.
// Sends where it serves and the service account that reaches it (as a pod's sidecar is reached) over IPC once
// serving; exits when the parent disconnects.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster } from '../../test/support/runlog-store-kit.ts';

export interface ApiServerReady {
  /** Holds the service account's ca.crt and token; removed when the server closes. */
  serviceAccountDir: string;
  /** KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT. */
  env: Record<string, string>;
}

const send = process.send?.bind(process);
if (send === undefined) throw new Error('runlog-api-server.ts runs as a child process of bench/micro/runlog-store.ts (IPC)');
const keepFinished = Number(process.argv[2]);
if (!Number.isInteger(keepFinished) || keepFinished < 1) throw new Error(`keepFinished must be a positive integer, got ${process.argv[2]}`);
const cluster = await startCluster({ keepFinished });
const serviceAccountDir = await mkdtemp(join(tmpdir(), 'runlet-bench-sa-'));
await cluster.server.writeServiceAccount(serviceAccountDir);
send({ serviceAccountDir, env: cluster.server.inClusterEnv } satisfies ApiServerReady);
process.once('disconnect', () => {
  void cluster.server
    .close()
    .then(() => rm(serviceAccountDir, { recursive: true, force: true }))
    .then(() => process.exit(0));
});
