// Storage for the chart's embedded PostgreSQL on the real Node (node.sh): the tier has no provisioner, so a test
// that installs the default install.yaml first gives the StatefulSet's claim (`data-runlet-postgres-0`) a
// PersistentVolume bound to it in advance: a folder of the Node's, owned by PostgreSQL's user (999) as the
// kubelet's fsGroup would make a provisioned volume (it does not for hostPath).
import { chown, mkdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The StatefulSet's volumeClaimTemplate `data`, of its pod 0, in the release namespace. */
export const POSTGRES_CLAIM = { namespace: 'runlet-system', name: 'data-runlet-postgres-0' } as const;
export const POSTGRES_UID = 999;

/** Makes the folder under `dir` and returns the PersistentVolume (a manifest to apply) bound to the claim. */
export async function postgresVolume(dir: string): Promise<Record<string, unknown>> {
  const path = join(dir, 'postgres-data');
  await mkdir(path);
  await chown(path, POSTGRES_UID, POSTGRES_UID);
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'runlet-postgres-data' },
    spec: {
      capacity: { storage: '10Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      hostPath: { path, type: 'Directory' },
      claimRef: POSTGRES_CLAIM,
    },
  };
}
