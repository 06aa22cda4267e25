// The collector: where sidecars send their run records, in signed batches, and the one writer of the results
// store. Served by every operator replica (operator/main.ts mounts it next to the management API), so app
// pods need no database credential: a batch is signed with the namespace's results key (results-key.ts) and
// may hold only that namespace's runs. A batch is written in one idempotent statement (pg-results.ts): a
// sidecar that retries one whose answer it never got writes nothing twice.
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import { RunRecordSchema, type RunRecordWithResult } from '../crds/run-record-schema.ts';
import { MAX_BATCH_BYTES, MAX_BATCH_RECORDS } from './batch-limits.ts';
import type { Admission, NamespaceQuotas } from './namespace-quotas.ts';
import type { PgResults } from './pg-results.ts';
import { RESULTS_SIGNATURE_HEADER, isBatchSignedBy } from './results-key.ts';

export const COLLECTOR_PATH = '/v1/results/:namespace/runs';
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export interface CollectorOptions {
  store: Pick<PgResults, 'writeBatch'>;
  /** The results key of a namespace's batches; undefined while the operator has no key yet (answered 503). */
  keyFor(namespace: string): Uint8Array | undefined;
  /** The largest body taken (413 above). Default MAX_BATCH_BYTES: a record with the largest result an App may keep. */
  maxBatchBytes?: number;
  /** Per-namespace quotas (namespace-quotas.ts): what of a batch is written; absent, all of it. */
  quotas?: Pick<NamespaceQuotas, 'admit'>;
}

/**
 * What a sidecar is answered: how many of its records changed a row (the others were as new already), and the
 * records refused, with why: a record no store could hold never holds up the valid ones beside it.
 */
export interface CollectorAnswer {
  received: number;
  written: number;
  refused: { index: number; id: unknown; reason: string; quota?: string }[];
  /**
   * Present while the namespace is at a quota its new runs are refused by (namespace-quotas.ts): why. The sidecar
   * answers async calls 507 run-store-quota-exceeded meanwhile, rather than accept runs whose records would be refused.
   */
  newRunsRefused?: string;
}

export const resultsCollector: FastifyPluginAsync<CollectorOptions> = async (fastify, options) => {
  const validate = compileRecordValidator();
  const bodyLimit = options.maxBatchBytes ?? MAX_BATCH_BYTES;
  // The signature covers the bytes: the body is read whole, as bytes, before anything is parsed.
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => done(null, body));
  fastify.post<{ Params: { namespace: string } }>(COLLECTOR_PATH, { bodyLimit }, async (request, reply) => {
    const { namespace } = request.params;
    if (!NAMESPACE.test(namespace)) return refuse(reply, 404, `no namespace ${JSON.stringify(namespace)}`);
    const key = options.keyFor(namespace);
    if (key === undefined) return refuse(reply, 503, `no results key for namespace ${namespace} yet`, true);
    const body = request.body;
    if (!Buffer.isBuffer(body)) return refuse(reply, 415, 'a batch is application/json');
    const signature = request.headers[RESULTS_SIGNATURE_HEADER];
    if (!isBatchSignedBy(key, body, typeof signature === 'string' ? signature : undefined)) {
      return refuse(reply, 401, `the batch is not signed with namespace ${namespace}'s results key`);
    }
    const batch = parseBatch(body, namespace, validate);
    if (typeof batch === 'string') return refuse(reply, 400, batch);
    const { records, indexes, refused } = batch;
    const received = records.length + refused.length;
    if (refused.length > 0) request.log.warn({ namespace, refused }, `refused ${refused.length} run records of a batch`);
    let written: number;
    let newRunsRefused: string | undefined;
    try {
      // The quotas' refusals are logged and counted where they are decided.
      const admitted: Pick<Admission, 'records' | 'refused' | 'newRunsRefused'> = options.quotas === undefined ? { records, refused: [] } : await options.quotas.admit(namespace, records);
      for (const { position, id, reason, quota } of admitted.refused) refused.push({ index: indexes[position]!, id, reason, quota });
      newRunsRefused = admitted.newRunsRefused;
      written = await options.store.writeBatch(admitted.records);
    } catch (error) {
      request.log.error({ err: error, namespace, records: records.length }, 'writing a batch of run records to the results store failed');
      return refuse(reply, 503, 'the results store could not be written; the operator log has the cause', true);
    }
    return { received, written, refused, newRunsRefused } satisfies CollectorAnswer;
  });
};

/** A record as a batch carries it: with its kept result, any JSON, when its App keeps results. */
const BatchRecordSchema = Type.Object(
  { ...RunRecordSchema.properties, result: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
);

function compileRecordValidator(): ValidateFunction<RunRecordWithResult> {
  // TypeBox schemas are JSON Schema; `Struct` admits no unknown member, as the RunLog CRD does not.
  // date-time is checked where it matters, createdAt (isRecorderInstant): the other instants are only shown.
  return new Ajv({ allErrors: false, strict: false, formats: { 'date-time': true } }).compile<RunRecordWithResult>(BatchRecordSchema);
}

/** The batch's valid records and the others, or why the whole batch is refused. */
function parseBatch(body: Buffer, namespace: string, validate: ValidateFunction<RunRecordWithResult>): Pick<CollectorAnswer, 'refused'> & { records: RunRecordWithResult[]; indexes: number[] } | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    return `the batch is not JSON: ${(error as Error).message}`;
  }
  const items = (parsed as { records?: unknown } | null)?.records;
  if (!Array.isArray(items)) return 'a batch is {"records": [...]}';
  if (items.length > MAX_BATCH_RECORDS) return `a batch holds at most ${MAX_BATCH_RECORDS} records, this one ${items.length}`;
  const records: RunRecordWithResult[] = [];
  /** Each valid record's index in the batch, for the refusals that come later (quotas). */
  const indexes: number[] = [];
  const refused: CollectorAnswer['refused'] = [];
  items.forEach((item: unknown, index) => {
    const reason = whyNotStorable(item, namespace, validate);
    if (reason === undefined) {
      records.push(item as RunRecordWithResult);
      indexes.push(index);
    } else {
      refused.push({ index, id: (item as { id?: unknown } | null)?.id ?? null, reason });
    }
  });
  return { records, indexes, refused };
}

function whyNotStorable(item: unknown, namespace: string, validate: ValidateFunction<RunRecordWithResult>): string | undefined {
  if (!validate(item)) {
    const [error] = validate.errors ?? [];
    return `not a run record: ${error?.instancePath || '(the record)'} ${error?.message ?? 'is invalid'}`;
  }
  if (item.projectId !== namespace) return `of project ${item.projectId}, not ${namespace}`;
  if (!UUID.test(item.id)) return `id ${JSON.stringify(item.id)} is not a UUID`;
  if (!isRecorderInstant(item.createdAt)) return `createdAt ${JSON.stringify(item.createdAt)} is not an instant as the recorder writes it`;
  return undefined;
}

/**
 * The column is a timestamptz: only the form the recorder writes (Date#toISOString of years 0001-9999), which
 * PostgreSQL reads back exactly; anything else (a 30 February, year 0) would fail the whole batch's statement.
 */
function isRecorderInstant(text: string): boolean {
  const time = Date.parse(text);
  return !Number.isNaN(time) && !text.startsWith('0000') && !text.startsWith('+') && !text.startsWith('-') && new Date(time).toISOString() === text;
}
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function refuse(reply: FastifyReply, status: number, detail: string, retry = false): FastifyReply {
  if (retry) reply.header('retry-after', '1');
  return reply.code(status).type('application/problem+json').send({ status, detail });
}
