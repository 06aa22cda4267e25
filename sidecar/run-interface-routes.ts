// The run interface as fastify routes: what `runlet dev` serves on its one port beside the management API, and
// what @fastify/swagger reads to write the OpenAPI document. Every route hands its request to the plain
// node:http pipeline (run-interface.ts), so the routes carry the documented contract and nothing else.
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RunInterface } from './run-interface.ts';
import {
  customAppSchema,
  documentSchema,
  runFunctionSchema,
  runInterfaceDocument,
  SHARED_SCHEMAS,
  WEBHOOK_CALLBACK_PARAMETERS,
} from './run-interface-schemas.ts';

/** Methods a custom app answers besides POST (POST on /{function} is runFunction, shared with Python apps). */
const CUSTOM_APP_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

export function runInterfaceRoutes(runInterface: RunInterface) {
  function handOver(request: FastifyRequest, reply: FastifyReply): void {
    reply.hijack();
    runInterface.handle(request.raw, reply.raw);
  }

  return async function register(app: FastifyInstance): Promise<void> {
    app.removeAllContentTypeParsers();
    // The body stays unread: the pipeline reads a Python call's with its limit and streams a custom app's.
    app.addContentTypeParser('*', (_request, _payload, done) => done(null));
    // The schemas are the documented contract; the pipeline validates (see run-interface-schemas.ts).
    app.setValidatorCompiler(() => () => true);
    // Paths of the interface that are no route of it get the pipeline's own 404 problem.
    app.setNotFoundHandler(handOver);
    for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
    await app.register(swagger, {
      openapi: runInterfaceDocument,
      exposeHeadRoutes: true,
      // Components named after the shared schemas' ids (Problem, SyncResult, ...) rather than def-N.
      refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
      transformObject: (document) => ('openapiObject' in document ? withCallbackHeaders(document.openapiObject) : document.swaggerObject),
    });

    app.get('/v4/openapi.json', { schema: documentSchema }, (_request, reply) => {
      reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(app.swagger()));
    });
    app.post('/v4/:project_id/:app_name/:function', { schema: runFunctionSchema }, handOver);
    for (const method of CUSTOM_APP_METHODS) {
      app.route({ method, url: '/v4/:project_id/:app_name/:function', schema: customAppSchema(method, 'path'), handler: handOver, exposeHeadRoute: false });
    }
    for (const method of ['POST', ...CUSTOM_APP_METHODS] as const) {
      app.route({ method, url: '/v4/:project_id/:app_name', schema: customAppSchema(method, 'root'), handler: handOver, exposeHeadRoute: false });
    }
    // Deeper custom-app paths: the same operations as /{function}, which OpenAPI 3.0 paths cannot template.
    app.all('/v4/:project_id/:app_name/*', { schema: { hide: true } }, handOver);
  };
}

/** Adds the webhook's header parameters to every callback operation (see WEBHOOK_CALLBACK_PARAMETERS). */
function withCallbackHeaders<T>(document: T): T {
  const paths = (document as { paths?: Record<string, Record<string, { callbacks?: Record<string, Record<string, Record<string, object>>> }>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const callback of Object.values(operation.callbacks ?? {})) {
        for (const expression of Object.values(callback)) {
          for (const callbackOperation of Object.values(expression)) Object.assign(callbackOperation, { parameters: WEBHOOK_CALLBACK_PARAMETERS });
        }
      }
    }
  }
  return document;
}
