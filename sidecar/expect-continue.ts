// `Expect: 100-continue` on the run port. node:http answers it with `100 Continue` before any handler runs, so
// a caller declaring a body over the limit was told to send it, only to be refused once it had. A body
// declared too large is refused (413) instead of the 100, and the caller never sends it.
import type { Server } from 'node:http';
import { ProblemError } from '../crds/problem.ts';
import { assertDeclaredLength } from './request-body.ts';
import { sendProblem } from './exchange.ts';
import { newRunId } from './runs/recorder.ts';

/** Makes `server` refuse, instead of continuing, a request whose `Content-Length` is over `limitBytes`. */
export function refuseOversizedExpectedBodies(server: Server, limitBytes: number): void {
  server.on('checkContinue', (request, response) => {
    try {
      assertDeclaredLength(request, limitBytes);
    } catch (problem) {
      if (!(problem instanceof ProblemError)) throw problem;
      // The caller holds the body back: the connection cannot carry a next request until it says what it does.
      response.setHeader('connection', 'close');
      sendProblem(response, newRunId(), problem);
      return;
    }
    // A chunked body, or one within the limit: what node:http does without this listener. A chunked body is
    // counted as it arrives (request-body.ts).
    response.writeContinue();
    server.emit('request', request, response);
  });
}
