// Serves the dashboard: a few static files (plain ES modules, HTML and CSS, no build step) read from
// dashboard/public/ at registration, and its configuration. The dashboard is a client of the management API
// only: it holds no session server-side; in a cluster the browser keeps the caller's token in sessionStorage
// and sends it as a bearer, and the management API judges it as it judges any caller.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyPluginAsync } from 'fastify';

export interface DashboardConfig {
  /** The project to show (runlet dev's); null: the user names it (a cluster, where projects are namespaces). */
  projectId: string | null;
  /** The management API wants a bearer token (a cluster): the dashboard asks for one. */
  tokenRequired: boolean;
  /** Why the API keys page cannot make keys here, or null when it can. */
  keysUnavailable: string | null;
}

const PUBLIC_DIR = join(import.meta.dirname, 'public');
const FILES = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/style.css': { file: 'style.css', type: 'text/css; charset=utf-8' },
} as const;

/**
 * Everything the page loads comes from this server; nothing inline runs. `connect-src 'self'`: the only calls
 * it makes are to the management API beside it.
 */
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // Served from the package: a new version is seen at once, and nothing of it holds secrets worth caching.
  'cache-control': 'no-cache',
};

export const dashboard: FastifyPluginAsync<DashboardConfig> = async (fastify, config) => {
  for (const [path, { file, type }] of Object.entries(FILES)) {
    const body = readFileSync(join(PUBLIC_DIR, file));
    fastify.get(path, { exposeHeadRoute: true }, (_request, reply) => reply.headers(SECURITY_HEADERS).type(type).send(body));
  }
  const configBody = JSON.stringify(config);
  fastify.get('/dashboard/config.json', { exposeHeadRoute: true }, (_request, reply) =>
    reply.headers(SECURITY_HEADERS).type('application/json; charset=utf-8').send(configBody),
  );
};
