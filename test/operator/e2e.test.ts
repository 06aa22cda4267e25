// The operator end to end (operator-suite.ts) against the in-memory API server with the test kubelet. The same
// suite runs against a real control plane in control-plane.test.ts (`make test-cluster`).
import { describe } from 'vitest';
import { startLocalCluster } from './local-cluster.ts';
import { operatorSuite, SUITE_OPTIONS } from './operator-suite.ts';

describe('operator end to end on the in-memory API server with the test kubelet', SUITE_OPTIONS, () => {
  operatorSuite(startLocalCluster);
});
