// The in-memory Kubernetes API server of test/kube, in its own process, for the sidecar that records its runs
// in a RunLog as in a pod. It holds the CRDs, the project's namespace and the App (the RunLog's owner, which
// the sidecar reads before it creates its RunLog), and writes the service account (ca.crt, token) the sidecar
// reaches it with, as in a pod.
// Its own process, not the orchestrator's: the orchestrator generates load in-process (autocannon, the stream
// client), and the RunLog writes it serves would otherwise run on that event loop; apart, its CPU is measured.
//   node bench/servers/kube-api-server.ts --service-account DIR --namespace NS --app NAME
//     → prints "listening on https://127.0.0.1:PORT" once the App exists and the service account is written
import { parseArgs } from 'node:util';
import { applyAppSpecDefaults } from '../../crds/validate.ts';
import { pythonSpec } from '../../test/support/operator-apps.ts';
import { createApp, createNamespace, prepareCluster } from '../../test/support/fake-cluster.ts';
import { startKubeApiServer } from '../../test/kube/index.ts';

const { values } = parseArgs({ options: { 'service-account': { type: 'string' }, namespace: { type: 'string' }, app: { type: 'string' } } });
const { 'service-account': serviceAccountDir, namespace, app } = values;
if (!serviceAccountDir || !namespace || !app) throw new Error('kube-api-server: --service-account, --namespace and --app are required');

const cluster = await prepareCluster(await startKubeApiServer());
await createNamespace(cluster.api, namespace);
// Stored as the real API server would store it, with the CRD's defaults (spec.runs.keepFinished among them).
await createApp(cluster.api, namespace, app, applyAppSpecDefaults(pythonSpec({}, `${app}-code`)) as Record<string, unknown>);
await cluster.server.writeServiceAccount(serviceAccountDir);
process.stdout.write(`listening on ${cluster.server.url}\n`);
process.once('SIGTERM', () => void cluster.close().finally(() => process.exit(0)));
