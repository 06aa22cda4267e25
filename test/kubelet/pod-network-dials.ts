// Pod-network addresses for the processes the test kubelet runs. A program in a pod (the operator's load
// scraper, its holder) dials other pods at their pod IPs, which here are labels of a documentation range
// (pod-network.ts) that nothing may dial. The kubelet writes which loopback port stands for each pod IP's port
// into a file (`PodNetworkDials.publish`); `node --import pod-network-preload.ts` in a pod's process
// (`RUNLET_TEST_POD_NETWORK` naming the file) sends a connection to such an address to its loopback port
// instead, before the loopback guard (test/support/loopback-only.ts) sees it, which still refuses any other.
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const POD_NETWORK_ENV = 'RUNLET_TEST_POD_NETWORK';
export const POD_NETWORK_PRELOAD = join(import.meta.dirname, 'pod-network-preload.ts');

/** Pod IP → pod port → the local port standing for it. */
export type DialMap = Record<string, Record<string, number>>;

/** Writes the map whole, by a rename, so a reader never sees half of it. */
export function publishDialMap(file: string, map: DialMap): void {
  const next = `${file}.next`;
  writeFileSync(next, JSON.stringify(map));
  renameSync(next, file);
}

/** Reads the map, again only when the file changed: a preload asks on every connection. */
export function dialMapReader(file: string): () => DialMap {
  let seen = -1;
  let map: DialMap = {};
  return () => {
    let mtimeMs: number;
    try {
      mtimeMs = statSync(file).mtimeMs;
    } catch {
      return map;
    }
    if (mtimeMs !== seen) {
      map = JSON.parse(readFileSync(file, 'utf8')) as DialMap;
      seen = mtimeMs;
    }
    return map;
  };
}
