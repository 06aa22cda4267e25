// Which Events a reconcile records on its App: a Warning for every failure it observes (the recorder turns
// repeats into count bumps, so a failure that lasts shows as one Event seen N times), and a note when the App
// starts or stops serving. Pure: from the Ready condition before and after.
import type { AppStatus } from '../crds/app-schema.ts';
import type { EventNote } from '../kube/event-recorder.ts';
import { FAILURE_REASONS, READY, type OwnedStatus } from './app-status.ts';

export function appEvents(previous: AppStatus | undefined, next: OwnedStatus): EventNote[] {
  const before = previous?.conditions?.find((c) => c.type === READY);
  const after = next.conditions.find((c) => c.type === READY);
  if (after === undefined) return [];
  const { reason, message } = after;
  if (after.status === 'False' && FAILURE_REASONS.has(reason)) return [{ type: 'Warning', reason, message }];
  const flipped = before?.status !== after.status;
  if (!flipped) return [];
  if (after.status === 'True') return [{ type: 'Normal', reason: READY, message }];
  // Stopping to serve matters only after serving: a new App is not Ready at first, and that is no news.
  if (before?.status !== 'True') return [];
  return [{ type: reason === 'RollingOut' ? 'Normal' : 'Warning', reason, message }];
}
