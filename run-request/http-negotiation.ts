// The few request-header decisions the run interface makes, without regular expressions on the hot path.

export function acceptsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('text/event-stream');
}

/** True when `Accept-Encoding` lists gzip (or `*`) without `q=0`. */
export function acceptsGzip(acceptEncoding: string | undefined): boolean {
  if (!acceptEncoding) return false;
  for (const part of acceptEncoding.split(',')) {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    if (coding !== 'gzip' && coding !== 'x-gzip' && coding !== '*') continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

/** A Python function name: an identifier, not private (no leading underscore). */
export function functionNameProblem(name: string): string | null {
  if (name === '') return 'The path names no function: call /v4/{project_id}/{app_name}/{function}';
  if (name.includes('/')) return `"${name}" is not a function name: the function is the single path segment after the app name`;
  if (name.charCodeAt(0) === 95 /* _ */) return `Function "${name}" is private (its name starts with "_")`;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return `"${name}" is not a valid Python function name`;
  return null;
}
