// The reserved query parameters of a run call, validated before anything runs.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';

export const RESERVED_PARAMETERS = ['async', 'webhookEndpoint'] as const;

export interface RunOptions {
  async: boolean;
  /** The raw `webhookEndpoint` value, validated by the webhook module. */
  webhookEndpoint: string | null;
}

/** A call without reserved parameters. */
export const NO_OPTIONS: RunOptions = Object.freeze({ async: false, webhookEndpoint: null });

export function parseRunOptions(query: Record<string, string | string[] | undefined>): RunOptions {
  const asyncValue = query.async;
  const webhookValue = query.webhookEndpoint;
  if (asyncValue === undefined && webhookValue === undefined) return NO_OPTIONS;
  return { async: parseAsyncFlag(asyncValue), webhookEndpoint: single('webhookEndpoint', webhookValue) };
}

function parseAsyncFlag(value: string | string[] | undefined): boolean {
  const flag = single('async', value);
  if (flag === null) return false;
  if (flag === 'true' || flag === '1') return true;
  if (flag === 'false' || flag === '0') return false;
  throw new ProblemError(Problems.invalidParameter, `async must be one of true, false, 1, 0; got "${flag}"`, {
    extensions: { parameter: 'async' },
  });
}

function single(name: string, value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  if (Array.isArray(value)) {
    throw new ProblemError(Problems.invalidParameter, `${name} is given ${value.length} times; give it once`, {
      extensions: { parameter: name },
    });
  }
  return value;
}

/**
 * The query string to send to a custom runtime: the caller's, minus the reserved parameters. The other
 * parameters keep their exact bytes (no re-encoding), so the app sees what the caller sent.
 */
export function forwardedQuery(rawQuery: string): string {
  // Percent-encoded names may spell a reserved one (`%61sync`): only a query without either can pass as is.
  if (!rawQuery.includes('async') && !rawQuery.includes('webhookEndpoint') && !rawQuery.includes('%')) return rawQuery;
  return rawQuery
    .split('&')
    .filter((pair) => !isReserved(pair.split('=', 1)[0]!))
    .join('&');
}

function isReserved(encodedName: string): boolean {
  let name: string;
  try {
    name = decodeURIComponent(encodedName.replaceAll('+', ' '));
  } catch {
    return false; // Not valid percent-encoding, so not one of ours: the app gets it as sent.
  }
  return (RESERVED_PARAMETERS as readonly string[]).includes(name);
}
