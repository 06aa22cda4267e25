// `limit`/`continue` paging of lists. The continue token (opaque to clients) records the list's
// resourceVersion and the storage key of the last item served; the next page resumes after that key in
// the current state. Objects that exist for the whole paging are therefore listed exactly once, however
// others are created or deleted meanwhile (the real server serves later pages from a snapshot instead).

import { storageOrderKey } from './store.ts';
import { badRequest } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

export interface Page {
  items: KubeObject[];
  /** The list's resourceVersion: that of the first page for continued lists. */
  resourceVersion: string;
  continueToken: string | undefined;
  remainingItemCount: number | undefined;
}

interface ContinueState {
  resourceVersion: string;
  after: string;
}

function encodeToken(state: ContinueState): string {
  return Buffer.from(JSON.stringify(state)).toString('base64url');
}

function decodeToken(token: string): ContinueState {
  try {
    const state: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (isPlainObject(state) && typeof state.resourceVersion === 'string' && typeof state.after === 'string') {
      return { resourceVersion: state.resourceVersion, after: state.after };
    }
  } catch {
    // fall through to the error below: a malformed token is the client's mistake, not ours
  }
  throw badRequest(`invalid continue token "${token}"`);
}

export function parseLimit(raw: string | null): number | undefined {
  if (raw === null || raw === '' || raw === '0') return undefined;
  if (!/^\d+$/.test(raw)) throw badRequest(`invalid limit "${raw}"`);
  return Number(raw);
}

/** `objects` must be in storage order (as ObjectStore.list returns them) and already filtered. */
export function paginate(
  objects: KubeObject[],
  limit: number | undefined,
  continueToken: string | null,
  currentResourceVersion: string,
): Page {
  const resumed = continueToken === null || continueToken === '' ? undefined : decodeToken(continueToken);
  const remaining = resumed === undefined ? objects : objects.filter((o) => storageOrderKey(o) > resumed.after);
  const resourceVersion = resumed?.resourceVersion ?? currentResourceVersion;
  if (limit === undefined || remaining.length <= limit) {
    return { items: remaining, resourceVersion, continueToken: undefined, remainingItemCount: undefined };
  }
  const items = remaining.slice(0, limit);
  return {
    items,
    resourceVersion,
    continueToken: encodeToken({ resourceVersion, after: storageOrderKey(items[items.length - 1]!) }),
    remainingItemCount: remaining.length - limit,
  };
}
