// One GET of the app container's server on the loopback, as the sidecar's checks of it ask: its status, or why
// nothing answered. A fresh connection each time (node:http, `agent: false`), so a Python app's sidecar never
// loads undici for its probes and a check never queues behind a call's kept-alive connection.
import { http } from '../node-http.ts';

export type ProbeAnswer = { answered: true; status: number } | { answered: false; reason: string };

/** `url`: the server's origin and path (`http://127.0.0.1:9000/health`); `timeoutMs`: for the whole answer. */
export function probeRuntime(url: string, timeoutMs: number): Promise<ProbeAnswer> {
  return new Promise((resolve) => {
    const probe = http.get(url, { agent: false, timeout: timeoutMs }, (response) => {
      const status = response.statusCode ?? 0;
      response.resume();
      response.on('end', () => resolve({ answered: true, status }));
      response.on('error', (err) => resolve({ answered: false, reason: `its answer broke off: ${err.message}` }));
    });
    probe.on('timeout', () => probe.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    probe.on('error', (err: NodeJS.ErrnoException) => resolve({ answered: false, reason: err.code === 'ECONNREFUSED' ? 'connection refused: nothing listens' : err.message }));
  });
}

export function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}
