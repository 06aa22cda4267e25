// `runlet runs APP`: the runs of an app from the management API (of `runlet dev` or a cluster), as a table or
// as JSON for scripts; `runlet runs cancel RUN_ID --app APP` cancels one (cli/runs-cancel.ts).
import type { RunRecord } from '../crds/run-record-schema.ts';
import { parseCommandArgs } from './arguments.ts';
import { CliError } from './cli-error.ts';
import { requestManagementApi } from './management-request.ts';
import { runCancelCommand } from './runs-cancel.ts';

export const RUNS_USAGE = `Usage: runlet runs APP [--project ID] [--status S] [--async-only] [--limit N] [--output table|json]
       runlet runs cancel RUN_ID --app APP [--project ID]

Lists the runs of APP, newest first, from the management API; or cancels one run of APP: a run still waiting
never starts, a running one is stopped, and it ends cancelled (runlet dev only, for now).

Options:
  --project ID      the app's project (default dev, or RUNLET_PROJECT)
  --status S        only runs in status S: pending, running, success, failure, cancelled
  --async-only      only async runs
  --limit N         at most N runs (default 20; pages are fetched as needed)
  --app APP         the app of the run to cancel
  --output FORMAT   table (default) or json (one JSON array)
  --api-url URL     the management API (default http://127.0.0.1:8080, or RUNLET_API_URL)
  --token TOKEN     bearer token for a cluster (or RUNLET_TOKEN); make one with
                    kubectl create token SERVICE_ACCOUNT --duration 24h`;

const STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled'];
const MAX_PAGE_SIZE = 500;

export async function runRunsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(args);
  if (values.output !== 'table' && values.output !== 'json') throw new CliError(`--output must be table or json, got "${values.output}"`, 2);
  // `cancel` with one more argument: an app named "cancel" still has its runs listed by `runlet runs cancel`.
  if (positionals[0] === 'cancel' && positionals.length === 2) {
    if (!values.app) throw new CliError(`runlet runs cancel needs --app, the run's app\n\n${RUNS_USAGE}`, 2);
    return runCancelCommand(positionals[1]!, { ...connection(values), app: values.app, output: values.output });
  }
  if (values.app !== undefined) throw new CliError(`--app is for runlet runs cancel; list an app's runs with runlet runs APP\n\n${RUNS_USAGE}`, 2);
  const [app, ...extra] = positionals;
  if (!app || extra.length > 0) throw new CliError(`runlet runs takes one APP\n\n${RUNS_USAGE}`, 2);
  const limit = Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1) throw new CliError(`--limit must be a positive integer, got "${values.limit}"`, 2);
  if (values.status !== undefined && !STATUSES.includes(values.status)) {
    throw new CliError(`--status must be one of ${STATUSES.join(', ')}, got "${values.status}"`, 2);
  }

  const { apiUrl, project, token } = connection(values);
  const runs: RunRecord[] = [];
  let nextToken: string | null = null;
  do {
    const query = new URLSearchParams({ pageSize: String(Math.min(limit - runs.length, MAX_PAGE_SIZE)) });
    if (values.status) query.set('status', values.status);
    if (values['async-only']) query.set('asyncOnly', 'true');
    if (nextToken) query.set('nextToken', nextToken);
    const url = `${apiUrl}/v2/projects/${encodeURIComponent(project)}/apps/${encodeURIComponent(app)}/runs?${query}`;
    const { body: page } = await requestManagementApi<{ items: RunRecord[]; nextToken: string | null }>(url, {}, {
      project,
      app,
      apiUrl,
      token,
      permission: { doing: 'list runs', clusterRole: 'runlet-runs-viewer' },
    });
    runs.push(...page.items);
    nextToken = page.nextToken;
  } while (nextToken && runs.length < limit);

  process.stdout.write(values.output === 'json' ? JSON.stringify(runs, null, 2) + '\n' : runsTable(runs));
  return 0;
}

function runsTable(runs: RunRecord[]): string {
  if (runs.length === 0) return 'No runs.\n';
  const rows = runs.map((run) => [
    run.id,
    run.functionName || '/',
    run.mode,
    run.status + (run.reason ? ` (${run.reason})` : ''),
    run.statusCode === null ? '-' : String(run.statusCode),
    run.createdAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
    run.runtimeMs === null ? '-' : `${Math.round(run.runtimeMs)}ms`,
    run.webhook ? `${run.webhook.state}/${run.webhook.attempts}` : '-',
    errorCell(run),
  ]);
  const header = ['RUN ID', 'FUNCTION', 'MODE', 'STATUS', 'CODE', 'CREATED', 'RUN TIME', 'WEBHOOK', 'ERROR'];
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** Where the management API is, whose project, and the bearer token: flag, else environment, else default. */
function connection(values: { 'api-url'?: string; project?: string; token?: string }): { apiUrl: string; project: string; token: string | undefined } {
  return {
    apiUrl: (values['api-url'] ?? process.env.RUNLET_API_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, ''),
    project: values.project ?? process.env.RUNLET_PROJECT ?? 'dev',
    token: values.token ?? process.env.RUNLET_TOKEN,
  };
}

/** Longest error shown in the table: one line of a terminal; `--output json` has it whole. */
const ERROR_CELL_CHARS = 80;

/** What went wrong, on one line: the error (`ValueError: boom`), else the reason (`replica_lost`). */
function errorCell(run: RunRecord): string {
  const text = run.error ? `${run.error.type}: ${run.error.message}`.replace(/\s+/g, ' ').trim() : (run.reason ?? '-');
  return text.length > ERROR_CELL_CHARS ? `${text.slice(0, ERROR_CELL_CHARS - 1)}…` : text;
}

function parse(args: string[]) {
  return parseCommandArgs(
    args,
    {
      project: { type: 'string' },
      app: { type: 'string' },
      status: { type: 'string' },
      'async-only': { type: 'boolean', default: false },
      limit: { type: 'string', default: '20' },
      output: { type: 'string', default: 'table' },
      'api-url': { type: 'string' },
      token: { type: 'string' },
    },
    RUNS_USAGE,
  );
}
