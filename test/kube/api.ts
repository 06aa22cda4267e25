// The REST surface: maps a request (method, URL, body) to discovery, the object lifecycle, lists,
// watches and reviews, and renders the answer as the real API server would. Transport concerns
// (listening, logging, injected faults, pausing) are server.ts's.

import type { ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import type { AuthReviews } from './auth-reviews.ts';
import { apiGroup, apiGroupList, apiResourceList, coreApiVersions } from './discovery.ts';
import type { DeleteOptions, ObjectLifecycle } from './lifecycle.ts';
import { paginate, parseLimit } from './paging.ts';
import { parseResourcePath, type ResourcePath } from './paths.ts';
import { apiVersionOf, resourceKey, type ResourceRegistry, type ResourceType } from './resources.ts';
import { combine, parseFieldSelector, parseLabelSelector, type ObjectPredicate } from './selectors.ts';
import { handleScale, servesScale } from './scale.ts';
import { badRequest, methodNotAllowed, resourceNotServed, successStatus } from './status.ts';
import type { ObjectStore } from './store.ts';
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
}

export interface ApiRequest {
  method: string;
  url: URL;
  contentType: string;
  body: Buffer;
}

/** A JSON (or, for health endpoints, text) answer; `streamed` when a watch took over the response. */
export type ApiReply = { status: number; body: unknown } | { streamed: true };

const VERSION_INFO = { major: '1', minor: '33', gitVersion: 'v1.33.0-runlet-fake', platform: 'linux/amd64' };
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
  if (pathname === '/version') return ok(VERSION_INFO);
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
  subresource: 'status' | 'scale' | undefined;
}

function resolve(ctx: ApiContext, pathname: string): Target {
  const path = parseResourcePath(pathname);
  const type = path && ctx.registry.find(path.group, path.version, path.plural);
  if (path === undefined || type === undefined) throw resourceNotServed(pathname);
  if (path.namespace !== undefined && !type.namespaced) throw resourceNotServed(pathname);
  if (path.subresource === 'scale' && servesScale(type)) return { type, path, subresource: 'scale' };
  if (path.subresource !== undefined && !(path.subresource === 'status' && type.hasStatus)) {
    throw resourceNotServed(pathname);
  }
  return { type, path, subresource: path.subresource === 'status' ? 'status' : undefined };
}

function filterOf(query: URLSearchParams): ObjectPredicate {
  return combine(parseLabelSelector(query.get('labelSelector')), parseFieldSelector(query.get('fieldSelector')));
}

function list(ctx: ApiContext, { type, path }: Target, query: URLSearchParams): ApiReply {
  const matching = ctx.lifecycle.list(type, path.namespace).filter(filterOf(query));
  const currentVersion = String(ctx.store.currentRevision);
  const page = paginate(matching, parseLimit(query.get('limit')), query.get('continue'), currentVersion);
  const metadata: Record<string, unknown> = { resourceVersion: page.resourceVersion };
  if (page.continueToken !== undefined) metadata.continue = page.continueToken;
  if (page.remainingItemCount !== undefined) metadata.remainingItemCount = page.remainingItemCount;
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

function collection(ctx: ApiContext, target: Target, request: ApiRequest, res: ServerResponse): ApiReply {
  const { type, path } = target;
  const query = request.url.searchParams;
  switch (request.method) {
    case 'GET':
      return path.watchPrefix || isTrue(query.get('watch')) ? watch(ctx, target, query, res) : list(ctx, target, query);
    case 'POST':
      if (type.namespaced && path.namespace === undefined) break;
      return ok(render(type, ctx.lifecycle.create(type, path.namespace, objectBody(request))), 201);
    case 'DELETE':
      return deleteCollection(ctx, target, request, query);
  }
  throw methodNotAllowed(request.method, request.url.pathname);
}

function item(ctx: ApiContext, target: Target, request: ApiRequest): ApiReply {
  const { type, path } = target;
  const name = path.name!;
  const query = request.url.searchParams;
  if (target.subresource === 'scale') {
    const scale = handleScale(ctx.lifecycle, type, path.namespace, name, request.method, request.method === 'GET' ? undefined : parseBody(request));
    if (scale === undefined) throw methodNotAllowed(request.method, request.url.pathname);
    return ok(scale);
  }
  const subresource = target.subresource;
  switch (request.method) {
    case 'GET':
      return ok(render(type, ctx.lifecycle.get(type, path.namespace, name)));
    case 'PUT':
      return ok(render(type, ctx.lifecycle.replace(type, path.namespace, name, objectBody(request), subresource)));
    case 'PATCH': {
      const patch = {
        contentType: request.contentType.split(';')[0]!.trim(),
        body: parseBody(request),
        fieldManager: query.get('fieldManager') ?? undefined,
        force: isTrue(query.get('force')),
      };
      const { object, created } = ctx.lifecycle.patch(type, path.namespace, name, patch, subresource);
      return ok(render(type, object), created ? 201 : 200);
    }
    case 'DELETE':
      if (subresource !== undefined) break;
      return ok(deleteOne(ctx, type, path.namespace, name, deleteOptions(request, query)));
  }
  throw methodNotAllowed(request.method, request.url.pathname);
}

export function handleApiRequest(ctx: ApiContext, request: ApiRequest, res: ServerResponse): ApiReply {
  const { pathname, searchParams } = request.url;
  if (searchParams.has('dryRun')) throw badRequest('dryRun is not supported by the fake API server');
  if (request.method === 'GET') {
    const answer = discovery(ctx, pathname);
    if (answer !== undefined) return answer;
  }
  const target = resolve(ctx, pathname);
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
