// The in-memory API server of test/kube, with the Runlet CRDs and App `hello` (keepFinished from argv), as a
// child process of the RunLog store benchmark: there, its handling of each status patch of up to 1 MiB (parse,
// merge, schema validation) would block the event loop the benchmark measures, and count in its CPU time.
// Sends `{ url }` over IPC once serving; exits when the parent disconnects.
import { startCluster } from '../../sidecar/runs/runlog-test-kit.ts';

export interface ApiServerReady {
  url: string;
}

const send = process.send?.bind(process);
if (send === undefined) throw new Error('runlog-api-server.ts runs as a child process of bench/micro/runlog-store.ts (IPC)');
const keepFinished = Number(process.argv[2]);
if (!Number.isInteger(keepFinished) || keepFinished < 1) throw new Error(`keepFinished must be a positive integer, got ${process.argv[2]}`);
const cluster = await startCluster({ keepFinished });
send({ url: cluster.server.url } satisfies ApiServerReady);
process.once('disconnect', () => {
  void cluster.server.close().then(() => process.exit(0));
});
