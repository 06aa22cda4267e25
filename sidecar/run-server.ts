// The pod sidecar's run port: the run interface on a plain node:http server, plus its OpenAPI document. The
// document is built on its first request: fastify and its swagger plugin, which write it, are not loaded
// until then (they are a third of the sidecar's memory at start, and no call needs them).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { Problems } from './errors.ts';
import { ProblemError } from './problem.ts';
import { sendProblem, type RunInterface } from './run-interface.ts';
import { newRunId } from './runs/recorder.ts';

const DOCUMENT_PATH = '/v4/openapi.json';
/**
 * Longer than an ingress keeps idle upstream connections (nginx: 60 s), so the sidecar never closes one the
 * ingress is about to reuse; fastify's default, which the sidecar had before.
 */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

export function createRunServer(runInterface: RunInterface, logger: Logger): Server {
  let document: Promise<string> | null = null;

  function serveDocument(response: ServerResponse): void {
    document ??= buildDocument(runInterface);
    document.then(
      (text) => {
        response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
        response.end(text);
      },
      (err: unknown) => {
        document = null;
        logger.error({ err }, 'building the OpenAPI document failed');
        sendProblem(response, newRunId(), new ProblemError(Problems.internal, `The OpenAPI document could not be built: ${(err as Error).message}`));
      },
    );
  }

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (isDocumentRequest(request)) serveDocument(response);
    else runInterface.handle(request, response);
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // A custom app's upload or a long stream has no time limit here beyond the run's own.
  server.requestTimeout = 0;
  return server;
}

function isDocumentRequest(request: IncomingMessage): boolean {
  const url = request.url ?? '';
  if (!url.startsWith(DOCUMENT_PATH) || (url.length > DOCUMENT_PATH.length && url[DOCUMENT_PATH.length] !== '?')) return false;
  return request.method === 'GET' || request.method === 'HEAD';
}

async function buildDocument(runInterface: RunInterface): Promise<string> {
  const [{ default: Fastify }, { runInterfaceRoutes }] = await Promise.all([import('fastify'), import('./run-interface-routes.ts')]);
  const app = Fastify({ logger: false });
  try {
    await app.register(runInterfaceRoutes(runInterface));
    // Asked over (injected) HTTP: the swagger plugin lives inside the routes' encapsulated context.
    const answer = await app.inject({ method: 'GET', url: DOCUMENT_PATH });
    if (answer.statusCode !== 200) throw new Error(`GET ${DOCUMENT_PATH} answered ${answer.statusCode}: ${answer.body.slice(0, 200)}`);
    return answer.body;
  } finally {
    await app.close();
  }
}
