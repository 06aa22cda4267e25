// Discovery documents (`/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`), rendered
// from the registry. KubernetesObjectApi reads the resource lists to map apiVersion+kind to a URL.

import { apiVersionOf, type ResourceRegistry, type ResourceType } from './resources.ts';
import { servesScale } from './scale.ts';

interface GroupVersionForDiscovery {
  groupVersion: string;
  version: string;
}

interface ApiGroup {
  name: string;
  versions: GroupVersionForDiscovery[];
  preferredVersion: GroupVersionForDiscovery;
}

export function coreApiVersions(serverAddress: string): object {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

function groups(registry: ResourceRegistry): ApiGroup[] {
  const versionsByGroup = new Map<string, string[]>();
  for (const type of registry.all()) {
    if (type.group === '') continue;
    const versions = versionsByGroup.get(type.group) ?? [];
    if (!versions.includes(type.version)) versions.push(type.version);
    versionsByGroup.set(type.group, versions);
  }
  return [...versionsByGroup].map(([name, versions]) => {
    const listed = versions.map((version) => ({ groupVersion: `${name}/${version}`, version }));
    return { name, versions: listed, preferredVersion: listed[0] };
  });
}

export function apiGroupList(registry: ResourceRegistry): object {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: groups(registry) };
}

export function apiGroup(registry: ResourceRegistry, name: string): object | undefined {
  const group = groups(registry).find((g) => g.name === name);
  return group === undefined ? undefined : { kind: 'APIGroup', apiVersion: 'v1', ...group };
}

function apiResources(type: ResourceType): object[] {
  const resource = {
    name: type.plural,
    singularName: type.singular,
    namespaced: type.namespaced,
    kind: type.kind,
    verbs: type.verbs,
    ...(type.shortNames.length > 0 ? { shortNames: type.shortNames } : {}),
    ...(type.categories.length > 0 ? { categories: type.categories } : {}),
  };
  const subresources: object[] = [];
  if (type.hasStatus) {
    subresources.push({ name: `${type.plural}/status`, singularName: '', namespaced: type.namespaced, kind: type.kind, verbs: ['get', 'patch', 'update'] });
  }
  if (servesScale(type)) {
    subresources.push({ name: `${type.plural}/scale`, singularName: '', namespaced: type.namespaced, group: 'autoscaling', version: 'v1', kind: 'Scale', verbs: ['get', 'patch', 'update'] });
  }
  return [resource, ...subresources];
}

/** `undefined` when the group/version is not served. */
export function apiResourceList(registry: ResourceRegistry, group: string, version: string): object | undefined {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: apiVersionOf({ group, version }),
    resources: types.flatMap(apiResources),
  };
}
