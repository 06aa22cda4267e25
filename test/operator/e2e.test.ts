// The operator end to end (operator-suite.ts) against the in-memory API server with the test kubelet, and
// against the cluster KUBECONFIG points at when one is given (see real-cluster.ts).
import { describe } from 'vitest';
import { startLocalCluster } from './local-cluster.ts';
import { operatorSuite, SUITE_OPTIONS } from './operator-suite.ts';
import { realClusterSkipReason, startRealCluster } from './real-cluster.ts';

describe('operator end to end on the in-memory API server with the test kubelet', SUITE_OPTIONS, () => {
  operatorSuite(startLocalCluster);
});

const skipReason = realClusterSkipReason();
if (skipReason !== undefined) console.log(`operator end to end on a real cluster: skipped, ${skipReason}`);
describe.skipIf(skipReason !== undefined)('operator end to end on the cluster of KUBECONFIG', SUITE_OPTIONS, () => {
  operatorSuite(startRealCluster);
});
