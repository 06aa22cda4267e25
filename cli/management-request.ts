// One request to the management API (of `runlet dev` or a cluster), for the `runlet runs` commands: its JSON
// answer, or a CliError that names the fix (start runlet dev, pass a token, bind a role, check the names).
import { CliError } from './cli-error.ts';

export interface ManagementContext {
  project: string;
  app: string;
  apiUrl: string;
  token: string | undefined;
  /** What the token must be allowed, and the ClusterRole that allows it: for the 403 message. */
  permission: { doing: string; clusterRole: string };
}

/** Sends the request; a 2xx answer's JSON body is returned, any other answer is thrown as a CliError. */
export async function requestManagementApi<T>(url: string, init: RequestInit, context: ManagementContext): Promise<{ status: number; body: T }> {
  let response: Response;
  try {
    // x-runlet-client: what runlet dev asks of a state change without a JSON body (local/dev-request-guard.ts).
    const headers: Record<string, string> = { 'x-runlet-client': 'runlet' };
    if (context.token) headers.authorization = `Bearer ${context.token}`;
    response = await fetch(url, { ...init, headers });
  } catch (err) {
    throw new CliError(
      `cannot reach the management API at ${context.apiUrl} (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}): ` +
        'is runlet dev running, or is --api-url (RUNLET_API_URL) the operator\'s address?',
    );
  }
  if (response.ok) return { status: response.status, body: (await response.json()) as T };
  const problem = await readProblem(response);
  if (response.status === 401) {
    throw new CliError(
      `the management API needs a valid token (${problem.detail}): pass --token or set RUNLET_TOKEN, e.g. RUNLET_TOKEN=$(kubectl create token runs-reader --duration 24h)`,
    );
  }
  if (response.status === 403) {
    throw new CliError(
      `the token may not ${context.permission.doing} in project ${context.project} (${problem.detail}): bind the ClusterRole ${context.permission.clusterRole} to its service account in namespace ${context.project}`,
    );
  }
  if (problem.type.endsWith('#route-not-found')) throw new CliError(`the management API at ${context.apiUrl} does not serve this operation (${problem.detail})`);
  if (response.status === 404) throw new CliError(`${problem.detail} (check the app name and --project)`);
  throw new CliError(`the management API answered ${response.status}: ${problem.detail}`);
}

async function readProblem(response: Response): Promise<{ type: string; detail: string }> {
  const text = await response.text();
  try {
    const problem = JSON.parse(text) as { type?: string; detail?: string; title?: string };
    return { type: problem.type ?? '', detail: problem.detail ?? problem.title ?? text };
  } catch {
    return { type: '', detail: text.slice(0, 200) || response.statusText };
  }
}
