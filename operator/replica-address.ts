// Where the operator reaches a replica's sidecar: its pod IP and a port of it (the admin port for load scrapes
// and cancels). The test kubelets map pod addresses to loopback ports, so tests pass their own.

export interface ReplicaAddress {
  host: string;
  port: number;
}
