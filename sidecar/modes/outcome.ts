import type { RunError } from '../../crds/run-record-schema.ts';

/** What a finished run produced: the caller's answer is built from it, and so is the webhook delivery. */
export interface RunOutcome {
  statusCode: number;
  success: boolean;
  /** The result as JSON text (a stream's items as a JSON list; a custom app's body as JSON or a JSON string). */
  resultJson: string | null;
  error: RunError | null;
  runTimeMs: number;
}
