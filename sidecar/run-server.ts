// The pod sidecar's run port: the run interface, plus its OpenAPI document. Each connection is read first by
// the front (run-front/), which answers the common call itself — a POST with a small body, in about half the
// CPU node:http spends on it — and passes anything else on to node:http, this server's own handling, for the
// rest of that connection's life. The document is built on its first request: fastify and its swagger
// plugin, which write it, are not loaded until then (they are a third of the sidecar's memory at start, and
// no call needs them).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { FrontConnection, type FrontSettings } from './run-front/front-connection.ts';
import { refusedHttp10TransferEncoding } from './run-front/http10-transfer-encoding.ts';
import { refuseExpectedBodiesEarly } from './expect-continue.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_HEAD_TIMEOUT_MS, headTimeoutServerOptions, type RequestTimeouts } from '../run-request/request-timeouts.ts';
import { sendProblem } from '../run-request/problem-answer.ts';
import { DEFAULT_BODY_LIMIT_BYTES } from '../run-request/request-body.ts';
import type { RunInterface } from './run-interface.ts';
import { newRunId } from '../run-request/run-id.ts';
import { http } from './node-http.ts';

export interface RunServerOptions {
  /** The run interface's body limit (`--body-limit-bytes`), for an `Expect: 100-continue` refused at once. */
  bodyLimitBytes?: number;
  /** The request deadline is the run interface's (its `bodyBounds`), as is the budget. */
  timeouts?: Partial<FrontTimeouts>;
}

type FrontTimeouts = Pick<RequestTimeouts, 'headMs' | 'bodyMs'>;

const DOCUMENT_PATH = '/v4/openapi.json';
/**
 * Longer than an ingress keeps idle upstream connections (nginx: 60 s), so the sidecar never closes one the
 * ingress is about to reuse; fastify's default, which the sidecar had before.
 */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** Bodies the front reads whole; longer ones node:http reads as they come. */
const FRONT_MAX_BODY_BYTES = 256 * 1024;

/** node:http's server, with the front reading each connection before node:http's own handling does. */
class RunServer extends http.Server {
  readonly #frontConnections = new Set<FrontConnection>();

  constructor(
    runInterface: RunInterface,
    handleRequest: (request: IncomingMessage, response: ServerResponse) => void,
    bodyLimitBytes: number,
    timeouts: FrontTimeouts,
  ) {
    // The body's pauses are bounded where it is read (request-body.ts), the head's here.
    super(headTimeoutServerOptions(timeouts.headMs), (request, response) => {
      if (!refusedHttp10TransferEncoding(request, response)) handleRequest(request, response);
    });
    this.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    refuseExpectedBodiesEarly(this, runInterface, bodyLimitBytes);
    const nodeHandling = this.listeners('connection')[0] as ((this: Server, socket: Socket) => void) | undefined;
    if (nodeHandling === undefined) throw new Error("node:http's server has no connection listener to pass connections on to");
    this.removeListener('connection', nodeHandling);
    const settings: FrontSettings = {
      runInterface,
      passOn: (socket: Socket) => nodeHandling.call(this, socket),
      keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
      maxBodyBytes: FRONT_MAX_BODY_BYTES,
      headTimeoutMs: timeouts.headMs,
      bodyTimeoutMs: timeouts.bodyMs,
      // The run interface's own bounds: one budget and one deadline for the front and node:http alike.
      deadlineMs: runInterface.bodyBounds.deadlineMs,
      budget: runInterface.bodyBounds.budget,
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
export function createFrontedServer(
  runInterface: RunInterface,
  handleRequest: (request: IncomingMessage, response: ServerResponse) => void,
  options: RunServerOptions = {},
): Server {
  return new RunServer(runInterface, handleRequest, options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES, requestTimeouts(options));
}

export function createRunServer(runInterface: RunInterface, logger: Logger, options: RunServerOptions = {}): Server {
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
        sendProblem(response, newRunId(), new ProblemError(Problems.internalError, `The OpenAPI document could not be built: ${(err as Error).message}`));
      },
    );
  }

  const handleRequest = (request: IncomingMessage, response: ServerResponse): void => {
    if (isDocumentRequest(request)) serveDocument(response);
    else runInterface.handle(request, response);
  };
  return createFrontedServer(runInterface, handleRequest, options);
}

function requestTimeouts(options: RunServerOptions): FrontTimeouts {
  return {
    headMs: options.timeouts?.headMs ?? DEFAULT_REQUEST_HEAD_TIMEOUT_MS,
    bodyMs: options.timeouts?.bodyMs ?? DEFAULT_REQUEST_BODY_TIMEOUT_MS,
  };
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
