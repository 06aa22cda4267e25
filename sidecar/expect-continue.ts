// `Expect: 100-continue` on the run port. node:http answers it with `100 Continue` before any handler runs, so
// a caller declaring a body over the limit, or one with no valid token, was told to send it, only to be refused
// once it had. Such a request is refused (413, 401, 403, …) instead of the 100, and the caller never sends it.
import type { IncomingMessage, Server } from 'node:http';
import { ProblemError } from '../crds/problem.ts';
import { assertDeclaredLength } from '../run-request/request-body.ts';
import { sendProblem } from '../run-request/problem-answer.ts';
import type { RunInterface } from './run-interface.ts';
import { newRunId } from '../run-request/run-id.ts';

/**
 * Makes `server` refuse, instead of continuing, a request whose `Content-Length` is over `limitBytes` or whose
 * head alone is refused by the run interface (route, drain, auth, app: as the front screens a head).
 */
export function refuseExpectedBodiesEarly(server: Server, runInterface: Pick<RunInterface, 'screenHead'>, limitBytes: number): void {
  server.on('checkContinue', (request, response) => {
    void refusalOf(request, runInterface, limitBytes).then((problem) => {
      if (problem === null) {
        // A chunked body, or one within the limit, of a caller let in: what node:http does without this listener.
        // A chunked body is counted as it arrives (request-body.ts).
        response.writeContinue();
        server.emit('request', request, response);
        return;
      }
      // The caller holds the body back: the connection cannot carry a next request until it says what it does.
      response.setHeader('connection', 'close');
      sendProblem(response, newRunId(), problem);
    });
  });
}

async function refusalOf(request: IncomingMessage, runInterface: Pick<RunInterface, 'screenHead'>, limitBytes: number): Promise<ProblemError | null> {
  try {
    assertDeclaredLength(request, limitBytes);
  } catch (problem) {
    if (!(problem instanceof ProblemError)) throw problem;
    return problem;
  }
  const screening = await runInterface.screenHead(request.url ?? '/', request.headers);
  return screening instanceof ProblemError ? screening : null;
}
