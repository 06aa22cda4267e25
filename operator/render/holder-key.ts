// An app namespace's hand-over key — its own, random, derived from nothing (autoscaling/holder-key.ts) — which
// the sidecars there read into RUNLET_HOLDER_KEY (a secretKeyRef, render/sidecar-container.ts) to trust the run
// id and wait the holder vouches for (run-request/auth/held-run.ts), and the holder reads by this name. Like the
// sidecar's ServiceAccount and RoleBinding (render/rbac.ts) it is owned by every App of the namespace, so it goes
// with the last one.
import type { V1Secret } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './labels.ts';
import { HOLDER_KEY_DATA_KEY, HOLDER_KEY_SECRET } from './names.ts';
import { SIDECAR_COMPONENT_LABEL, sharedOwnerReferences } from './rbac.ts';

export const HOLDER_KEY_COMPONENT = 'holder-key';

/** A holder key Secret's data (the control key's and each namespace's): the key's bytes as hex text. */
export function holderKeyData(key: Uint8Array): Record<string, string> {
  return { [HOLDER_KEY_DATA_KEY]: Buffer.from(Buffer.from(key).toString('hex')).toString('base64') };
}

export function renderHolderKeyCopy(namespace: string, owners: readonly App[], key: Uint8Array): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: HOLDER_KEY_SECRET,
      namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [SIDECAR_COMPONENT_LABEL]: HOLDER_KEY_COMPONENT },
      ownerReferences: sharedOwnerReferences(owners),
    },
    data: holderKeyData(key),
  };
}
