// The Endpoints of the holder's own Service (the operator pods' holder port): the addresses an App at zero is
// pointed at (endpoints-switch.ts). When they change — an operator pod replaced on a rollout, one gone with its
// node — every App at zero must follow at once, or its callers are sent to a holder that is no longer there
// until the App's next reconcile. One watch of that one object; `onChange` hears of changes of its addresses,
// not of its other fields (the controller rewrites it for annotations and resourceVersions too).
import type { V1Endpoints } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import type { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { KubePath } from '../../kube/paths.ts';
import { ResourceWatch } from '../../kube/watch.ts';
import { holderAddressesOf, type HolderService } from './endpoints-switch.ts';
import type { HolderAddress } from './endpoints.ts';

export type EndpointsObject = KubeObject & Pick<V1Endpoints, 'subsets'>;

export interface HolderEndpointsOptions {
  api: KubeApi;
  service: HolderService;
  logger: Logger;
  watchdogMs: number;
  /** The holder's addresses are now `addresses` (empty: the Endpoints list none, or are gone). */
  onChange(addresses: HolderAddress[]): void;
}

/** Sorted, so that the same addresses in another order are no change. */
function canonical(endpoints: EndpointsObject | undefined): HolderAddress[] {
  return holderAddressesOf(endpoints).sort((a, b) => (a.ip === b.ip ? a.port - b.port : a.ip < b.ip ? -1 : 1));
}

export function watchHolderEndpoints(options: HolderEndpointsOptions): ResourceWatch<EndpointsObject> {
  const { service } = options;
  return new ResourceWatch<EndpointsObject>({
    name: 'holder-endpoints',
    api: options.api,
    logger: options.logger,
    watchdogMs: options.watchdogMs,
    path: KubePath.of({ version: 'v1', namespace: service.namespace, resource: 'endpoints' }),
    fieldSelector: `metadata.name=${service.name}`,
    transform: (endpoints) => ({ apiVersion: endpoints.apiVersion, kind: endpoints.kind, metadata: { name: endpoints.metadata?.name, namespace: endpoints.metadata?.namespace, resourceVersion: endpoints.metadata?.resourceVersion }, subsets: endpoints.subsets }),
    handlers: {
      onUpsert: (endpoints, previous) => {
        const addresses = canonical(endpoints);
        if (!isDeepStrictEqual(addresses, canonical(previous))) options.onChange(addresses);
      },
      onDelete: () => options.onChange([]),
    },
  });
}
