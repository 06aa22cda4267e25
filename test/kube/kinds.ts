// Per-kind server behaviour beyond generic storage: what the real API server (or the controllers that
// run inside it) does for secrets, namespaces, role bindings, endpoints and CustomResourceDefinitions on every
// write.
import { isIP } from 'node:net';

import { CRD_RESOURCE_KEY, crdResourceTypes, establishedStatus, validateCrd } from './crds.ts';
import type { ResourceRegistry } from './resources.ts';
import type { StatusCause } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

export interface KindBehavior {
  /** Server-side defaulting and kind validation of the object about to be stored; mutates `next`. */
  prepare?(next: KubeObject, previous: KubeObject | undefined): StatusCause[];
  /** After the object was stored. */
  stored?(object: KubeObject): void;
  /** After the object was removed from storage. */
  removed?(object: KubeObject): void;
}

/** Secrets: `stringData` is write-only convenience, merged into base64 `data` on write. */
const secrets: KindBehavior = {
  prepare(next) {
    const { stringData } = next;
    if (stringData === undefined) return [];
    if (!isPlainObject(stringData)) {
      return [{ reason: 'FieldValueInvalid', field: 'stringData', message: 'must be a map of strings' }];
    }
    const data = isPlainObject(next.data) ? { ...next.data } : {};
    for (const [key, value] of Object.entries(stringData)) data[key] = Buffer.from(String(value)).toString('base64');
    next.data = data;
    delete next.stringData;
    return [];
  },
};

/** Namespaces start Active; termination (phase Terminating) is lifecycle.ts's job. */
const namespaces: KindBehavior = {
  prepare(next, previous) {
    if (previous === undefined) next.status = { phase: 'Active' };
    return [];
  },
};

/**
 * Role bindings: `roleRef` is immutable (the real server answers 422 "cannot change roleRef"); pointing a
 * binding at another role means deleting and re-creating it.
 */
const roleBindings: KindBehavior = {
  prepare(next, previous) {
    const before = isPlainObject(previous?.roleRef) ? previous.roleRef : {};
    const after = isPlainObject(next.roleRef) ? next.roleRef : {};
    const same = ['apiGroup', 'kind', 'name'].every((field) => before[field] === after[field]);
    if (previous === undefined || same) return [];
    return [{ reason: 'FieldValueInvalid', field: 'roleRef', message: 'cannot change roleRef' }];
  },
};

/**
 * What a special address is (Kubernetes' validateNonSpecialIP, pkg/apis/core/validation), in its words: none
 * may be an endpoint — a Service's endpoints are addresses other nodes can reach.
 */
function specialAddressProblem(ip: string): string | undefined {
  const v4 = /^(?:::ffff:)?(\d+)\.(\d+)\.(\d+)\.(\d+)$/i.exec(ip);
  if (v4 !== null) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    if (a === 0 && b === 0 && c === 0 && d === 0) return 'may not be unspecified (0.0.0.0)';
    if (a === 127) return 'may not be in the loopback range (127.0.0.0/8)';
    if (a === 169 && b === 254) return 'may not be in the link-local range (169.254.0.0/16)';
    if (a === 224 && b === 0 && c === 0) return 'may not be in the link-local multicast range (224.0.0.0/24)';
    return undefined;
  }
  const lower = ip.toLowerCase();
  if (lower === '::') return 'may not be unspecified (0.0.0.0)';
  if (lower === '::1') return 'may not be in the loopback range (127.0.0.0/8)';
  if (/^fe[89ab]/.test(lower)) return 'may not be in the link-local range (169.254.0.0/16)';
  if (/^ff02:/.test(lower)) return 'may not be in the link-local multicast range (224.0.0.0/24)';
  return undefined;
}

/** Endpoints: each address a valid IP, none loopback, link-local or unspecified (as the real server refuses them). */
const endpoints: KindBehavior = {
  prepare(next) {
    const subsets = Array.isArray(next.subsets) ? (next.subsets as unknown[]) : [];
    return subsets.flatMap((subset, i) =>
      (['addresses', 'notReadyAddresses'] as const).flatMap((list) => {
        const addresses = isPlainObject(subset) && Array.isArray(subset[list]) ? (subset[list] as unknown[]) : [];
        return addresses.flatMap((address, j) => {
          const ip = isPlainObject(address) && typeof address.ip === 'string' ? address.ip : '';
          const problem = isIP(ip) === 0 ? 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)' : specialAddressProblem(ip);
          return problem === undefined ? [] : [{ reason: 'FieldValueInvalid', field: `subsets[${i}].${list}[${j}].ip`, message: `Invalid value: "${ip}": ${problem}` }];
        });
      }),
    );
  },
};

/** EndpointSlices: each address a valid IP of the slice's address type (IPv4 or IPv6; FQDN is not served here). */
const endpointSlices: KindBehavior = {
  prepare(next) {
    const addressType = next.addressType;
    if (addressType !== 'IPv4' && addressType !== 'IPv6') {
      return [{ reason: 'FieldValueNotSupported', field: 'addressType', message: `Unsupported value: ${JSON.stringify(addressType)}: supported values: "IPv4", "IPv6"` }];
    }
    const family = addressType === 'IPv4' ? 4 : 6;
    const endpoints = Array.isArray(next.endpoints) ? (next.endpoints as unknown[]) : [];
    return endpoints.flatMap((endpoint, i) => {
      const addresses = isPlainObject(endpoint) && Array.isArray(endpoint.addresses) ? (endpoint.addresses as unknown[]) : [];
      if (addresses.length === 0) return [{ reason: 'FieldValueRequired', field: `endpoints[${i}].addresses`, message: 'Required value: must contain at least 1 address' }];
      return addresses.flatMap((address, j) =>
        typeof address === 'string' && isIP(address) === family ? [] : [{ reason: 'FieldValueInvalid', field: `endpoints[${i}].addresses[${j}]`, message: `Invalid value: ${JSON.stringify(address)}: must be a valid ${addressType} address` }],
      );
    });
  },
};

function customResourceDefinitions(
  registry: ResourceRegistry,
  removeAllObjects: (resourceKey: string) => void,
): KindBehavior {
  return {
    prepare(next) {
      const causes = validateCrd(next);
      if (causes.length > 0) return causes;
      const { group, names } = next.spec as { group: string; names: { plural: string } };
      if (registry.isBuiltin(group, names.plural)) {
        const message = 'conflicts with a built-in resource';
        return [{ reason: 'FieldValueInvalid', field: 'spec.names.plural', message }];
      }
      next.status ??= establishedStatus(next);
      return [];
    },
    stored(crd) {
      registry.setCustom(crd.metadata.name!, crdResourceTypes(crd));
    },
    removed(crd) {
      // The real server deletes all custom objects before the CRD goes away; so does the fake, at once.
      removeAllObjects(crd.metadata.name!);
      registry.removeCustom(crd.metadata.name!);
    },
  };
}

export function kindBehaviors(
  registry: ResourceRegistry,
  removeAllObjects: (resourceKey: string) => void,
): Map<string, KindBehavior> {
  return new Map([
    ['secrets', secrets],
    ['namespaces', namespaces],
    ['endpoints', endpoints],
    ['endpointslices.discovery.k8s.io', endpointSlices],
    ['rolebindings.rbac.authorization.k8s.io', roleBindings],
    ['clusterrolebindings.rbac.authorization.k8s.io', roleBindings],
    [CRD_RESOURCE_KEY, customResourceDefinitions(registry, removeAllObjects)],
  ]);
}
