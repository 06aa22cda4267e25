// The REST surface: maps a request (method, URL, body) to discovery, the object lifecycle, lists,
// watches and reviews, and renders the answer as the real API server would. Transport concerns
// (listening, logging, injected faults, pausing) are server.ts's.

import type { ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import type { AuthReviews } from './auth-reviews.ts';
import { apiGroup, apiGroupList, apiResourceList, coreApiVersions } from './discovery.ts';
import type { DeleteOptions, ObjectLifecycle, WriteOptions } from './lifecycle.ts';
import { managerFromUserAgent } from './managed-fields.ts';
import { openApiDocument } from './openapi-routes.ts';
import { paginate, parseLimit } from './paging.ts';
import { parseResourcePath, type ResourcePath } from './paths.ts';
import { apiVersionOf, resourceKey, type ResourceRegistry, type ResourceType } from './resources.ts';
import { combine, parseFieldSelector, parseLabelSelector, type ObjectPredicate } from './selectors.ts';
import { scaledParent, scaleOf, servesScale } from './scale.ts';
import { badRequest, methodNotAllowed, resourceNotServed, successStatus } from './status.ts';
import type { ObjectStore } from './store.ts';
import { acceptsTable, listTable, objectTable } from './table.ts';
import { JWKS_PATH, OPENID_CONFIGURATION_PATH, openIdConfiguration, serviceAccountKeySet } from './service-account-issuer.ts';
import { answerTokenRequest } from './token-requests.ts';
import { isPlainObject, type KubeObject } from './types.ts';
import type { WatchHub } from './watch.ts';

export interface ApiContext {
  registry: ResourceRegistry;
  store: ObjectStore;
  lifecycle: ObjectLifecycle;
  watches: WatchHub;
  reviews: AuthReviews;
  /** host:port, for `/api`'s serverAddressByClientCIDRs. */
  serverAddress: string;
  /** Server-side cap on watch duration, like the real server's --min-request-timeout. */
  maxWatchSeconds: number | undefined;
  /** What `/version` answers. */
  version: VersionInfo;
}

export interface VersionInfo {
  major: string;
  minor: string;
  gitVersion: string;
  platform: string;
}

export const DEFAULT_VERSION = 'v1.33.0-runlet-fake';

/** `/version` for a gitVersion, numbers as a real server reports them (`v1.28.4` → major "1", minor "28"). */
export function versionInfo(gitVersion: string): VersionInfo {
  const numbers = /^v(\d+)\.(\d+)\./.exec(gitVersion);
  if (numbers === null) throw new Error(`the fake API server's version must look like v1.28.4, got "${gitVersion}"`);
  return { major: numbers[1]!, minor: numbers[2]!, gitVersion, platform: 'linux/amd64' };
}

export interface ApiRequest {
  method: string;
  url: URL;
  contentType: string;
  /** The Accept header: Table renderings, protobuf OpenAPI. */
  accept: string;
  userAgent: string | undefined;
  body: Buffer;
}

/**
 * A JSON (or, for health endpoints, text) answer, or bytes of another content type (protobuf OpenAPI);
 * `streamed` when a watch took over the response.
 */
export type ApiReply = { status: number; body: unknown } | { status: number; bytes: Buffer; contentType: string } | { streamed: true };

const HEALTH_PATHS = new Set(['/healthz', '/livez', '/readyz']);

function ok(body: unknown, status = 200): ApiReply {
  return { status, body };
}

/** The body as JSON, or as YAML for YAML content types (apply patches are YAML, of which JSON is a subset). */
function parseBody(request: ApiRequest): unknown {
  if (request.body.length === 0) return undefined;
  const text = request.body.toString('utf8');
  try {
    return request.contentType.includes('yaml') ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw badRequest(`cannot parse the ${request.contentType || 'request'} body: ${(error as Error).message}`);
  }
}

function objectBody(request: ApiRequest): KubeObject {
  const body = parseBody(request);
  if (!isPlainObject(body)) throw badRequest('the request body must be a JSON object');
  if (body.metadata !== undefined && !isPlainObject(body.metadata)) throw badRequest('metadata must be an object');
  return { ...body, metadata: body.metadata ?? {} } as KubeObject;
}

/** The object as the requested API version presents it (versions share storage; no conversion). */
function render(type: ResourceType, object: KubeObject): KubeObject {
  return { ...object, apiVersion: apiVersionOf(type), kind: type.kind };
}

/** Typed lists of built-in kinds omit apiVersion/kind on items; custom resource lists keep them. */
function renderListItem(type: ResourceType, object: KubeObject): KubeObject {
  if (type.custom) return render(type, object);
  const { apiVersion: _apiVersion, kind: _kind, ...item } = object;
  return item as KubeObject;
}

function isTrue(value: string | null): boolean {
  return value === 'true' || value === '1';
}

function discovery(ctx: ApiContext, pathname: string): ApiReply | undefined {
  const segments = pathname.split('/').filter((s) => s !== '');
  if (pathname === '/version') return ok(ctx.version);
  if (pathname === OPENID_CONFIGURATION_PATH) return ok(openIdConfiguration(`https://${ctx.serverAddress}`));
  if (pathname === JWKS_PATH) return ok(serviceAccountKeySet());
  if (HEALTH_PATHS.has(pathname)) return ok('ok');
  if (pathname === '/api') return ok(coreApiVersions(ctx.serverAddress));
  if (pathname === '/apis') return ok(apiGroupList(ctx.registry));
  if (segments[0] === 'api' && segments.length === 2) {
    const list = apiResourceList(ctx.registry, '', segments[1]);
    if (list === undefined) throw resourceNotServed(pathname);
    return ok(list);
  }
  if (segments[0] === 'apis' && segments.length === 2) {
    const group = apiGroup(ctx.registry, segments[1]);
    if (group === undefined) throw resourceNotServed(pathname);
    return ok(group);
  }
  if (segments[0] === 'apis' && segments.length === 3) {
    const list = apiResourceList(ctx.registry, segments[1], segments[2]);
    if (list === undefined) throw resourceNotServed(pathname);
    return ok(list);
  }
  return undefined;
}

interface Target {
  type: ResourceType;
  path: ResourcePath;
  subresource: 'status' | undefined;
  /** The request is for the object's `/scale` subresource (scale.ts). */
  scale?: true;
  /** A ServiceAccount's `/token` subresource: the TokenRequest API (token-requests.ts). */
  token?: true;
}

function resolve(ctx: ApiContext, pathname: string): Target {
  const path = parseResourcePath(pathname);
  const type = path && ctx.registry.find(path.group, path.version, path.plural);
  if (path === undefined || type === undefined) throw resourceNotServed(pathname);
  if (path.namespace !== undefined && !type.namespaced) throw resourceNotServed(pathname);
  if (path.subresource === 'scale' && servesScale(type) && path.name !== undefined) return { type, path, subresource: undefined, scale: true };
  if (path.subresource === 'token' && type.plural === 'serviceaccounts' && type.group === '' && path.name !== undefined) {
    return { type, path, subresource: undefined, token: true };
  }
  if (path.subresource !== undefined && !(path.subresource === 'status' && type.hasStatus)) {
    throw resourceNotServed(pathname);
  }
  return { type, path, subresource: path.subresource === 'status' ? 'status' : undefined };
}

function filterOf(query: URLSearchParams): ObjectPredicate {
  return combine(parseLabelSelector(query.get('labelSelector')), parseFieldSelector(query.get('fieldSelector')));
}

function list(ctx: ApiContext, { type, path }: Target, request: ApiRequest): ApiReply {
  const query = request.url.searchParams;
  const matching = ctx.lifecycle.list(type, path.namespace).filter(filterOf(query));
  const currentVersion = String(ctx.store.currentRevision);
  const page = paginate(matching, parseLimit(query.get('limit')), query.get('continue'), currentVersion);
  const metadata: Record<string, unknown> = { resourceVersion: page.resourceVersion };
  if (page.continueToken !== undefined) metadata.continue = page.continueToken;
  if (page.remainingItemCount !== undefined) metadata.remainingItemCount = page.remainingItemCount;
  if (acceptsTable(request.accept)) {
    return ok(listTable(type, page.items.map((item) => render(type, item)), metadata, query.get('includeObject')));
  }
  return ok({
    apiVersion: apiVersionOf(type),
    kind: `${type.kind}List`,
    metadata,
    items: page.items.map((item) => renderListItem(type, item)),
  });
}

function watch(ctx: ApiContext, { type, path }: Target, query: URLSearchParams, res: ServerResponse): ApiReply {
  const requested = query.get('timeoutSeconds');
  if (requested !== null && !/^\d+$/.test(requested)) throw badRequest(`invalid timeoutSeconds "${requested}"`);
  const limits = [requested === null ? undefined : Number(requested), ctx.maxWatchSeconds].filter(
    (seconds): seconds is number => seconds !== undefined && seconds > 0,
  );
  ctx.watches.serve(res, {
    type,
    namespace: path.namespace,
    matches: filterOf(query),
    resourceVersion: query.get('resourceVersion') ?? undefined,
    allowBookmarks: isTrue(query.get('allowWatchBookmarks')),
    timeoutMs: limits.length === 0 ? undefined : Math.min(...limits) * 1000,
    render: (object) => render(type, object),
  });
  return { streamed: true };
}

function deleteOptions(request: ApiRequest, query: URLSearchParams): DeleteOptions {
  if (query.has('dryRun')) throw badRequest('dryRun of a delete is not supported by the fake API server');
  const body = parseBody(request);
  const options = isPlainObject(body) ? body : {};
  const policy = query.get('propagationPolicy') ?? options.propagationPolicy;
  const orphan = isTrue(query.get('orphanDependents')) || options.orphanDependents === true;
  const preconditions = isPlainObject(options.preconditions) ? options.preconditions : undefined;
  return {
    propagationPolicy: typeof policy === 'string' ? policy : orphan ? 'Orphan' : undefined,
    preconditions: preconditions as DeleteOptions['preconditions'],
  };
}

function deleteOne(
  ctx: ApiContext,
  type: ResourceType,
  namespace: string | undefined,
  name: string,
  options: DeleteOptions,
): unknown {
  const outcome = ctx.lifecycle.delete(type, namespace, name, options);
  if (!outcome.removed) return render(type, outcome.object);
  return successStatus({ name, group: type.group, kind: type.plural, uid: outcome.object.metadata.uid });
}

function deleteCollection(
  ctx: ApiContext,
  { type, path }: Target,
  request: ApiRequest,
  query: URLSearchParams,
): ApiReply {
  const options = deleteOptions(request, query);
  const deleted: KubeObject[] = [];
  for (const object of ctx.lifecycle.list(type, path.namespace).filter(filterOf(query))) {
    const { namespace, name } = object.metadata;
    // Garbage collection of an earlier item may already have taken this one.
    if (ctx.store.get(resourceKey(type), namespace, name!) === undefined) continue;
    ctx.lifecycle.delete(type, namespace, name!, options);
    deleted.push(renderListItem(type, object));
  }
  return ok({ apiVersion: apiVersionOf(type), kind: `${type.kind}List`, metadata: {}, items: deleted });
}

/** `dryRun=All` (the only value there is) makes a write a dry run. */
function writeOptions(request: ApiRequest): WriteOptions {
  const query = request.url.searchParams;
  const dryRun = query.getAll('dryRun');
  if (dryRun.some((value) => value !== 'All')) {
    throw badRequest(`dryRun: unsupported value ${JSON.stringify(dryRun)}: the only supported value is "All"`);
  }
  return { manager: query.get('fieldManager') ?? managerFromUserAgent(request.userAgent), dryRun: dryRun.length > 0 };
}

function collection(ctx: ApiContext, target: Target, request: ApiRequest, res: ServerResponse): ApiReply {
  const { type, path } = target;
  const query = request.url.searchParams;
  switch (request.method) {
    case 'GET':
      return path.watchPrefix || isTrue(query.get('watch')) ? watch(ctx, target, query, res) : list(ctx, target, request);
    case 'POST': {
      if (type.namespaced && path.namespace === undefined) break;
      const created = ctx.lifecycle.create(type, path.namespace, objectBody(request), writeOptions(request));
      return ok(render(type, created), 201);
    }
    case 'DELETE':
      return deleteCollection(ctx, target, request, query);
  }
  throw methodNotAllowed(request.method, request.url.pathname);
}

/** GET, PUT or PATCH of a `/scale` subresource: a change of the parent's `spec.replicas` only. */
function scaleItem(ctx: ApiContext, { type, path }: Target, request: ApiRequest): ApiReply {
  const name = path.name!;
  const parent = ctx.lifecycle.get(type, path.namespace, name);
  if (request.method === 'GET') return ok(scaleOf(parent));
  if (request.method !== 'PUT' && request.method !== 'PATCH') throw methodNotAllowed(request.method, request.url.pathname);
  const contentType = request.method === 'PATCH' ? request.contentType.split(';')[0]!.trim() : undefined;
  const scaled = scaledParent(type, parent, { contentType, body: parseBody(request) });
  return ok(scaleOf(ctx.lifecycle.replace(type, path.namespace, name, scaled, undefined, writeOptions(request))));
}

function item(ctx: ApiContext, target: Target, request: ApiRequest): ApiReply {
  if (target.scale) return scaleItem(ctx, target, request);
  const { type, path, subresource } = target;
  const name = path.name!;
  const query = request.url.searchParams;
  switch (request.method) {
    case 'GET': {
      const object = render(type, ctx.lifecycle.get(type, path.namespace, name));
      return ok(acceptsTable(request.accept) ? objectTable(type, object, query.get('includeObject')) : object);
    }
    case 'PUT': {
      const replaced = ctx.lifecycle.replace(type, path.namespace, name, objectBody(request), subresource, writeOptions(request));
      return ok(render(type, replaced));
    }
    case 'PATCH': {
      const patch = {
        contentType: request.contentType.split(';')[0]!.trim(),
        body: parseBody(request),
        fieldManager: query.get('fieldManager') ?? undefined,
        force: isTrue(query.get('force')),
      };
      const { object, created } = ctx.lifecycle.patch(type, path.namespace, name, patch, subresource, writeOptions(request));
      return ok(render(type, object), created ? 201 : 200);
    }
    case 'DELETE':
      if (subresource !== undefined) break;
      return ok(deleteOne(ctx, type, path.namespace, name, deleteOptions(request, query)));
  }
  throw methodNotAllowed(request.method, request.url.pathname);
}

export function handleApiRequest(ctx: ApiContext, request: ApiRequest, res: ServerResponse): ApiReply {
  const { pathname } = request.url;
  if (request.method === 'GET') {
    const answer = discovery(ctx, pathname) ?? openApiDocument(ctx.registry, pathname, request.accept);
    if (answer !== undefined) return answer;
  }
  const target = resolve(ctx, pathname);
  if (target.token) {
    if (request.method !== 'POST') throw methodNotAllowed(request.method, pathname);
    const serviceAccount = ctx.lifecycle.get(target.type, target.path.namespace, target.path.name!);
    const pod = (namespace: string, name: string) => ctx.store.get('pods', namespace, name);
    return ok(answerTokenRequest(ctx.reviews, serviceAccount, parseBody(request), pod), 201);
  }
  if (!target.type.verbs.includes('get')) {
    // A review kind: create-only, answered and never stored.
    const answer = request.method === 'POST' && target.path.name === undefined
      ? ctx.reviews.answer(resourceKey(target.type), parseBody(request))
      : undefined;
    if (answer === undefined) throw methodNotAllowed(request.method, pathname);
    return ok(answer, 201);
  }
  return target.path.name === undefined ? collection(ctx, target, request, res) : item(ctx, target, request);
}
