// The pod sidecar's run port: the run interface, plus its OpenAPI document. Each connection is read first by
// the front (run-front/), which answers the common call itself — a POST with a small body, in about half the
// CPU node:http spends on it — and passes anything else on to node:http, this server's own handling, for the
// rest of that connection's life. The document is built on its first request: fastify and its swagger
// plugin, which write it, are not loaded until then (they are a third of the sidecar's memory at start, and
// no call needs them).
import { Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { FrontConnection } from './run-front/front-connection.ts';
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

/** Bodies the front reads whole; longer ones node:http reads as they come. */
const FRONT_MAX_BODY_BYTES = 256 * 1024;
/** How long the front waits for the rest of a request before node:http takes the connection over. */
const FRONT_INCOMPLETE_REQUEST_MS = 5_000;

/** node:http's server, with the front reading each connection before node:http's own handling does. */
class RunServer extends Server {
  readonly #frontConnections = new Set<FrontConnection>();

  constructor(runInterface: RunInterface, handleRequest: (request: IncomingMessage, response: ServerResponse) => void) {
    super(handleRequest);
    this.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    // A custom app's upload or a long stream has no time limit here beyond the run's own.
    this.requestTimeout = 0;
    const nodeHandling = this.listeners('connection')[0] as ((this: Server, socket: Socket) => void) | undefined;
    if (nodeHandling === undefined) throw new Error("node:http's server has no connection listener to pass connections on to");
    this.removeListener('connection', nodeHandling);
    const settings = {
      runInterface,
      passOn: (socket: Socket) => nodeHandling.call(this, socket),
      keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
      maxBodyBytes: FRONT_MAX_BODY_BYTES,
      incompleteRequestMs: FRONT_INCOMPLETE_REQUEST_MS,
    };
    const gone = (connection: FrontConnection) => this.#frontConnections.delete(connection);
    this.on('connection', (socket: Socket) => {
      this.#frontConnections.add(new FrontConnection(socket, settings, gone));
    });
  }

  // node:http's close() calls this too.
  override closeIdleConnections(): void {
    super.closeIdleConnections();
    for (const connection of this.#frontConnections) connection.closeIdle();
  }

  override closeAllConnections(): void {
    super.closeAllConnections();
    for (const connection of this.#frontConnections) connection.destroy();
  }
}

/**
 * node:http's server with the front reading each connection first, and `handleRequest` for whatever the front
 * passes on: `runlet dev` gives it fastify's handler (the run routes, the management API, the admin paths), so
 * its calls take the same path as the sidecar's.
 */
export function createFrontedServer(runInterface: RunInterface, handleRequest: (request: IncomingMessage, response: ServerResponse) => void): Server {
  return new RunServer(runInterface, handleRequest);
}

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

  return new RunServer(runInterface, (request: IncomingMessage, response: ServerResponse) => {
    if (isDocumentRequest(request)) serveDocument(response);
    else runInterface.handle(request, response);
  });
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
