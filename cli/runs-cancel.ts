// `runlet runs cancel RUN_ID --app APP`: asks the management API to cancel one run, and says what became of it.
import type { RunRecord } from '../crds/run-record-schema.ts';
import { requestManagementApi } from './management-request.ts';

export interface CancelTarget {
  apiUrl: string;
  project: string;
  app: string;
  token: string | undefined;
  output: string;
}

export async function runCancelCommand(runId: string, target: CancelTarget): Promise<number> {
  const { apiUrl, project, app } = target;
  const url = `${apiUrl}/v2/projects/${encodeURIComponent(project)}/apps/${encodeURIComponent(app)}/runs/${encodeURIComponent(runId)}/cancel`;
  const { body } = await requestManagementApi<{ item: RunRecord }>(url, { method: 'POST' }, {
    ...target,
    permission: { doing: 'cancel runs', clusterRole: 'runlet-runs-operator' },
  });
  const run = body.item;
  if (target.output === 'json') process.stdout.write(JSON.stringify(run, null, 2) + '\n');
  else if (run.status === 'cancelled') process.stdout.write(`run ${run.id} is cancelled\n`);
  else process.stdout.write(`run ${run.id} is being cancelled (it was ${run.status}); runlet runs ${app} shows it cancelled once stopped\n`);
  return 0;
}
