// The run interface's paths: `/v4/{project_id}/{app_name}[/{rest}]`, split, percent-decoded, and the project and
// app checked against their rules (crds/route-names.ts), as the management API checks its own.
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { APP_NAME, PROJECT_ID, checkName } from '../crds/route-names.ts';

const RUN_PATH_PREFIX = '/v4/';

/** Where a request of the run interface goes: `/v4/{project_id}/{app_name}[/{rest}]`, segments decoded. */
export interface RunPath {
  projectId: string;
  appName: string;
  /** A Python function's name, or a custom app's path after the app name (any depth; '' for none). */
  rest: string;
  /** `rest` as the caller sent it, percent-encoding kept: what a custom app is sent. */
  rawRest: string;
}

export function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart === -1 ? url : url.slice(0, queryStart);
}

/**
 * As parseRunPath, with a path that is not valid percent-encoding, or names no valid project or app, as null too
 * (its caller answers it when it gets to it, through parseRunPath).
 */
export function parseRunPathOrNull(path: string): RunPath | null {
  try {
    return parseRunPath(path);
  } catch {
    return null;
  }
}

/**
 * Splits `/v4/{project_id}/{app_name}[/{rest}]`; null for any other path (`/v4/openapi.json` among them, which
 * its server answers). Segments are percent-decoded; a path that is not valid percent-encoding is refused, and so
 * is a project or app that no namespace or App could be named (400 `invalid-parameter` naming it).
 */
export function parseRunPath(path: string): RunPath | null {
  if (!path.startsWith(RUN_PATH_PREFIX)) return null;
  const projectEnd = path.indexOf('/', RUN_PATH_PREFIX.length);
  if (projectEnd === -1 || projectEnd === RUN_PATH_PREFIX.length) return null;
  const appEnd = path.indexOf('/', projectEnd + 1);
  const rawApp = appEnd === -1 ? path.slice(projectEnd + 1) : path.slice(projectEnd + 1, appEnd);
  if (rawApp === '') return null;
  const rawRest = appEnd === -1 ? '' : path.slice(appEnd + 1);
  return {
    projectId: checkName('project_id', PROJECT_ID, decodeSegment(path.slice(RUN_PATH_PREFIX.length, projectEnd), path)),
    appName: checkName('app_name', APP_NAME, decodeSegment(rawApp, path)),
    rest: decodeSegment(rawRest, path),
    rawRest,
  };
}

function decodeSegment(segment: string, path: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ProblemError(Problems.routeNotFound, `${path} is not a valid path: it has a malformed percent-encoding`);
  }
}
