// The `nextToken` of list runs: opaque to clients, base64url of a small versioned JSON that carries the last id
// of the page (the keyset cursor) and the scope it was issued for, so that a token replayed with other filters
// is refused instead of silently paging through a different list. It is not signed: a forged token can only
// move a cursor within runs the caller may list anyway.
import type { RunStatus } from '../crds/run-record-schema.ts';
import { RUN_STATUSES } from '../crds/run-record-values.ts';

/** What a token is valid for: the app and the filters of the request whose page it continues. */
export interface PageScope {
  projectId: string;
  appName: string;
  asyncOnly: boolean;
  status: RunStatus | null;
  functionName: string | null;
  createdAfter: string | null;
  createdBefore: string | null;
}

export type PageTokenResult = { ok: true; beforeId: string } | { ok: false; reason: string };

const TOKEN_VERSION = 1;
/** Far above a real token (about 200 characters); bounds the work spent on garbage. */
const MAX_TOKEN_LENGTH = 1024;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface TokenPayload {
  v: typeof TOKEN_VERSION;
  /** Id of the last run of the issued page: the next page starts below it. */
  after: string;
  project: string;
  app: string;
  asyncOnly: boolean;
  status: RunStatus | null;
  functionName: string | null;
  createdAfter: string | null;
  createdBefore: string | null;
}

const MALFORMED: PageTokenResult = { ok: false, reason: 'is malformed: pass back a nextToken exactly as received' };

export function encodePageToken(lastId: string, scope: PageScope): string {
  const payload: TokenPayload = {
    v: TOKEN_VERSION,
    after: lastId,
    project: scope.projectId,
    app: scope.appName,
    asyncOnly: scope.asyncOnly,
    status: scope.status,
    functionName: scope.functionName,
    createdAfter: scope.createdAfter,
    createdBefore: scope.createdBefore,
  };
  return Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
}

export function decodePageToken(token: string, scope: PageScope): PageTokenResult {
  if (token.length === 0 || token.length > MAX_TOKEN_LENGTH || !BASE64URL.test(token)) return MALFORMED;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    return MALFORMED;
  }
  if (!isRecord(parsed)) return MALFORMED;
  if (parsed.v !== TOKEN_VERSION) {
    return { ok: false, reason: `has version ${JSON.stringify(parsed.v)}, this server reads version ${TOKEN_VERSION}` };
  }
  const payload = asPayload(parsed);
  if (payload === undefined) return MALFORMED;
  if (payload.project !== scope.projectId || payload.app !== scope.appName) {
    return {
      ok: false,
      reason: `was issued for app ${payload.project}/${payload.app}, not ${scope.projectId}/${scope.appName}`,
    };
  }
  if (describeFilters(payload) !== describeFilters(scope)) {
    return {
      ok: false,
      reason:
        `was issued for ${describeFilters(payload)}, but this request asks ${describeFilters(scope)}: repeat the ` +
        'filters of the first page, or omit nextToken to start over',
    };
  }
  return { ok: true, beforeId: payload.after };
}

function asPayload(value: Record<string, unknown>): TokenPayload | undefined {
  // Filters added since version 1 was first issued are absent from older tokens: absent is "not filtered", so a
  // token issued before an upgrade still continues its list.
  const { after, project, app, asyncOnly, status, functionName = null, createdAfter = null, createdBefore = null } = value;
  if (typeof after !== 'string' || !UUID.test(after)) return undefined;
  if (typeof project !== 'string' || typeof app !== 'string' || typeof asyncOnly !== 'boolean') return undefined;
  if (status !== null && !RUN_STATUSES.includes(status as RunStatus)) return undefined;
  if (!isTextOrNull(functionName) || !isTextOrNull(createdAfter) || !isTextOrNull(createdBefore)) return undefined;
  return { v: TOKEN_VERSION, after, project, app, asyncOnly, status: status as RunStatus | null, functionName, createdAfter, createdBefore };
}

function isTextOrNull(value: unknown): value is string | null {
  return value === null || typeof value === 'string';
}

type Filters = Pick<PageScope, 'asyncOnly' | 'status' | 'functionName' | 'createdAfter' | 'createdBefore'>;

/** The filters of a list: the first two always, the others when given. */
function describeFilters(filters: Filters): string {
  const { asyncOnly, status, functionName, createdAfter, createdBefore } = filters;
  const optional = Object.entries({ functionName, createdAfter, createdBefore }).filter(([, value]) => value !== null);
  return [`asyncOnly=${asyncOnly}`, `status=${status ?? '(any)'}`, ...optional.map(([name, value]) => `${name}=${value}`)].join(', ');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
