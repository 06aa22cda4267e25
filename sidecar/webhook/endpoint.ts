// The `webhookEndpoint` query parameter of a run call: checked before anything runs (a bad one is the caller's
// 400, not a failed delivery later), and reduced to a form safe to store on the run record.

import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';

export const MAX_WEBHOOK_ENDPOINT_LENGTH = 2048;

/**
 * The endpoint as a URL: absolute, `http:` or `https:`, at most MAX_WEBHOOK_ENDPOINT_LENGTH characters.
 * Throws ProblemError(Problems.invalidWebhookEndpoint) saying which rule failed. Whether the destination's address is
 * admitted is not decided here but when connecting (guard.ts): DNS may answer differently by then.
 */
export function parseWebhookEndpoint(raw: string): URL {
  if (raw.length > MAX_WEBHOOK_ENDPOINT_LENGTH) {
    throw invalid(`webhookEndpoint is ${raw.length} characters long; at most ${MAX_WEBHOOK_ENDPOINT_LENGTH} are accepted`);
  }
  // Parsing without a base rejects relative references.
  const url = URL.parse(raw);
  if (url === null) {
    throw invalid('webhookEndpoint is not an absolute URL; expected e.g. https://example.com/hooks/runlet');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw invalid(`webhookEndpoint has scheme '${url.protocol.slice(0, -1)}'; only http and https are accepted`);
  }
  return url;
}

/**
 * The endpoint as stored on the run record and shown in listings: without query string, fragment and
 * userinfo, which are where callers put credentials.
 */
export function endpointForRecord(url: URL): string {
  return url.origin + url.pathname;
}

function invalid(detail: string): ProblemError {
  return new ProblemError(Problems.invalidWebhookEndpoint, detail);
}
