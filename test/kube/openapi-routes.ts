// The OpenAPI endpoints: `/openapi/v2` (protobuf when asked for, as kubectl does, else JSON), `/openapi/v3`
// (the index of group versions) and `/openapi/v3/{api/v1 | apis/{group}/{version}}`.

import { OPENAPI_V2_PROTOBUF, encodeOpenApiV2 } from './openapi-protobuf.ts';
import { openApiV2, openApiV3GroupVersion, openApiV3Index } from './openapi.ts';
import type { ResourceRegistry } from './resources.ts';
import { resourceNotServed } from './status.ts';

const V3_PREFIX = '/openapi/v3/';

/** A JSON document, or the protobuf one (api.ts's replies take both). */
export type OpenApiReply = { status: 200; body: object } | { status: 200; bytes: Buffer; contentType: string };

/** The answer to a GET of an OpenAPI path; undefined for other paths. */
export function openApiDocument(registry: ResourceRegistry, pathname: string, accept: string): OpenApiReply | undefined {
  if (pathname === '/openapi/v2') {
    const document = openApiV2(registry);
    if (accept.includes(OPENAPI_V2_PROTOBUF)) {
      // The real server's content type (Go's mime parser refuses the "@" of the requested one).
      return { status: 200, bytes: encodeOpenApiV2(document), contentType: 'application/octet-stream' };
    }
    return { status: 200, body: document };
  }
  if (pathname === '/openapi/v3') return { status: 200, body: openApiV3Index(registry) };
  if (!pathname.startsWith(V3_PREFIX)) return undefined;
  const document = openApiV3GroupVersion(registry, pathname.slice(V3_PREFIX.length));
  if (document === undefined) throw resourceNotServed(pathname);
  return { status: 200, body: document };
}
