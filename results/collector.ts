// The collector: where sidecars send their run records, in batches, and the one writer of the results store.
// Served by every operator replica on a port of its own (operator/main.ts), so app pods need no database
// credential. A pod proves who it is with its own projected ServiceAccount token for the collector's audience
// (results-token.ts; the kubelet rotates it; nothing a tenant can read from a Secret signs anything here):
// `identify` (the operator's TokenReview and pod cache, operator/results-callers.ts) names the namespace, App and
// pod the token belongs to, and the batch may hold only that App's runs, run by that pod. A batch is written in one idempotent statement
// (pg-results.ts): a sidecar that retries one whose answer it never got writes nothing twice.
//
// The caller is known before its body is read: the token is checked as the request arrives (onRequest), and a
// request refused then is answered at once and its connection closed: no unauthenticated byte of a body is held.
// The body is then read metered (body-intake.ts): each chunk counted into the bytes all requests may hold at
// once (byte-budget.ts: what has arrived, not what is declared, and fair between namespaces), and cut when it
// stops arriving. Every refused batch is counted by why (`onRefused`: the operator's metrics).
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { RunRecordSchema, type RunRecordWithResult } from '../crds/run-record-schema.ts';
import { MAX_BATCH_BYTES, MAX_BATCH_RECORDS } from './batch-limits.ts';
import { BodyRefusal, DEFAULT_BODY_PACE, readMeteredBody, type BodyIntake, type BodyPace, type BodyRefusalReason } from './body-intake.ts';
import { ByteBudget } from './byte-budget.ts';
import type { Admission, NamespaceQuotas } from './namespace-quotas.ts';
import type { PgResults } from './pg-results.ts';

export const COLLECTOR_PATH = '/v1/results/:namespace/runs';
/** Bodies held at once by default, across every request: a few of the largest batches, far below the operator's memory limit. */
export const DEFAULT_MAX_BYTES_IN_FLIGHT = 64 * 1024 * 1024;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const BEARER = /^bearer +(\S+)$/i;

/** Who sent a batch, as its token and the operator's caches say: the only App and pod whose runs it may hold. */
export interface CollectorCaller {
  namespace: string;
  appName: string;
  podName: string;
}

/** Why a token is not taken: 401 (no valid token for the collector), 403 (a valid token of no App pod), 503 (cannot tell now). */
export interface CallerRefusal {
  status: 401 | 403 | 503;
  detail: string;
  /** For the refusals' metric; default by status: unauthenticated, wrong-pod, review-unavailable. */
  reason?: CallerRefusalReason;
  /** The token's namespace, when the cluster vouched for it (TokenReview, or its signature: a 403): a label only a real namespace fills. */
  namespace?: string;
}

export type CallerRefusalReason = 'unauthenticated' | 'wrong-pod' | 'review-rate' | 'review-unavailable';

/** Why a batch was refused as a whole, as the refusals' metric labels it. */
export type BatchRefusalReason = CallerRefusalReason | 'wrong-namespace' | 'unsupported-media-type' | 'invalid' | 'store-unavailable' | BodyRefusalReason;

/** A batch refused: why, its answer's status, and its sender's namespace once the sender is authenticated (else undefined). */
export interface BatchRefusal {
  reason: BatchRefusalReason;
  status: number;
  namespace: string | undefined;
}

export interface CollectorOptions {
  store: Pick<PgResults, 'writeBatch'>;
  /** Who the bearer token is (operator/results-callers.ts): a caller, or why not. */
  identify(token: string): Promise<CollectorCaller | CallerRefusal>;
  /** The largest body taken (413 above). Default MAX_BATCH_BYTES: a record with the largest result an App may keep. */
  maxBatchBytes?: number;
  /**
   * Bytes of bodies held at once across requests, as they arrive, fairly shared between namespaces (503 +
   * Retry-After past them). Default DEFAULT_MAX_BYTES_IN_FLIGHT, a namespace owed at least a batch of it.
   */
  budget?: ByteBudget;
  /** How fast a body must keep arriving (408 below it). Default DEFAULT_BODY_PACE. */
  pace?: BodyPace;
  /** Told of every batch refused as a whole: the operator counts them (runlet_results_batches_refused_total). */
  onRefused?(refusal: BatchRefusal): void;
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
  const budget = options.budget ?? new ByteBudget(DEFAULT_MAX_BYTES_IN_FLIGHT, bodyLimit);
  const pace = options.pace ?? DEFAULT_BODY_PACE;
  if (budget.minShare < bodyLimit) throw new Error(`the room a namespace is owed of the collector's byte budget (${budget.minShare}) must hold at least one batch of ${bodyLimit} bytes`);
  /** Each admitted request's sender and body account, from onRequest to its body's parser and handler. */
  const admitted = new WeakMap<FastifyRequest, { caller: CollectorCaller; intake: BodyIntake }>();
  const refused = (reason: BatchRefusalReason, status: number, namespace?: string): void => options.onRefused?.({ reason, status, namespace });

  fastify.addContentTypeParser('application/json', (request, payload, done) => {
    const { intake } = admitted.get(request)!;
    readMeteredBody(payload, intake).then((body) => done(null, body), (error: unknown) => done(error as Error));
  });
  fastify.setErrorHandler((error, request, reply) => {
    if (!(error instanceof BodyRefusal)) throw error;
    const namespace = admitted.get(request)?.caller.namespace;
    if (error.reason !== 'aborted') request.log.info({ namespace, reason: error.reason }, `results collector: a batch's body was refused: ${error.message}`);
    refused(error.reason, error.status, namespace);
    return refuseUnread(reply, error.status, error.message, error.status === 503);
  });

  /** As the request arrives, before a byte of its body is read: who sends it. */
  async function admit(request: FastifyRequest<{ Params: { namespace: string } }>, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const startedAt = performance.now();
    const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
    if (token === undefined) {
      refused('unauthenticated', 401);
      reply.header('www-authenticate', 'Bearer realm="runlet-results"');
      return refuseUnread(reply, 401, 'a batch is sent with the pod\'s projected ServiceAccount token (Authorization: Bearer)');
    }
    let caller: CollectorCaller | CallerRefusal;
    try {
      caller = await options.identify(token);
    } catch (error) {
      request.log.error({ err: error }, 'results collector: the sender of a batch could not be identified');
      refused('review-unavailable', 503);
      return refuseUnread(reply, 503, 'the sender could not be identified now; the operator log has the cause', true);
    }
    if ('status' in caller) {
      refused(caller.reason ?? REASON_OF_STATUS[caller.status], caller.status, caller.namespace);
      return refuseUnread(reply, caller.status, caller.detail, caller.status === 503);
    }
    const { namespace } = request.params;
    if (!NAMESPACE.test(namespace) || namespace !== caller.namespace) {
      refused('wrong-namespace', 403, caller.namespace);
      return refuseUnread(reply, 403, `pod ${caller.namespace}/${caller.podName} sends only namespace ${caller.namespace}'s runs, not ${JSON.stringify(namespace)}'s`);
    }
    // Only a JSON body is read, and only by the metered parser: any other type is refused before a byte of it is
    // read (fastify's own text/plain parser would read it whole, outside the byte budget and the pace).
    if (!isJson(request.headers['content-type'])) {
      refused('unsupported-media-type', 415, caller.namespace);
      return refuseUnread(reply, 415, 'a batch is application/json');
    }
    const declared = request.headers['content-length'];
    const length = declared === undefined ? 0 : Number(declared);
    if (!Number.isSafeInteger(length) || length < 0) {
      refused('invalid', 400, caller.namespace);
      return refuseUnread(reply, 400, 'content-length is not a number of bytes');
    }
    if (length > bodyLimit) {
      refused('too-large', 413, caller.namespace);
      return refuseUnread(reply, 413, `a batch is at most ${bodyLimit} bytes, this one ${length}`);
    }
    // The body's bytes are counted as they arrive; cut for another namespace's, it is answered 503 (the error handler).
    const preemption = new AbortController();
    const holding = budget.open(caller.namespace, () => preemption.abort());
    // Given back once the answer is sent or the connection is gone, whichever comes first.
    reply.raw.once('close', holding.release);
    admitted.set(request, { caller, intake: { holding, maxBytes: bodyLimit, pace, preempted: preemption.signal, startedAt } });
    return undefined;
  }

  fastify.post<{ Params: { namespace: string } }>(COLLECTOR_PATH, { bodyLimit, onRequest: admit }, async (request, reply) => {
    const { caller } = admitted.get(request)!;
    const body = request.body;
    if (!Buffer.isBuffer(body)) {
      refused('unsupported-media-type', 415, caller.namespace);
      return refuse(reply, 415, 'a batch is application/json');
    }
    const batch = parseBatch(body, caller, validate);
    if (typeof batch === 'string') {
      refused('invalid', 400, caller.namespace);
      return refuse(reply, 400, batch);
    }
    const { records, indexes, refused: refusedRecords } = batch;
    const received = records.length + refusedRecords.length;
    if (refusedRecords.length > 0) request.log.warn({ caller, refused: refusedRecords }, `refused ${refusedRecords.length} run records of a batch`);
    let written: number;
    let newRunsRefused: string | undefined;
    try {
      // The quotas' refusals are logged and counted where they are decided.
      const quotaAdmitted: Pick<Admission, 'records' | 'refused' | 'newRunsRefused'> = options.quotas === undefined ? { records, refused: [] } : await options.quotas.admit(caller.namespace, records);
      for (const { position, id, reason, quota } of quotaAdmitted.refused) refusedRecords.push({ index: indexes[position]!, id, reason, quota });
      newRunsRefused = quotaAdmitted.newRunsRefused;
      written = await options.store.writeBatch(quotaAdmitted.records);
    } catch (error) {
      request.log.error({ err: error, caller, records: records.length }, 'writing a batch of run records to the results store failed');
      refused('store-unavailable', 503, caller.namespace);
      return refuse(reply, 503, 'the results store could not be written; the operator log has the cause', true);
    }
    return { received, written, refused: refusedRecords, newRunsRefused } satisfies CollectorAnswer;
  });
};

const REASON_OF_STATUS: Record<CallerRefusal['status'], CallerRefusalReason> = { 401: 'unauthenticated', 403: 'wrong-pod', 503: 'review-unavailable' };

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
function parseBatch(body: Buffer, caller: CollectorCaller, validate: ValidateFunction<RunRecordWithResult>): Pick<CollectorAnswer, 'refused'> & { records: RunRecordWithResult[]; indexes: number[] } | string {
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
    const reason = whyNotStorable(item, caller, validate);
    if (reason === undefined) {
      records.push(item as RunRecordWithResult);
      indexes.push(index);
    } else {
      refused.push({ index, id: (item as { id?: unknown } | null)?.id ?? null, reason });
    }
  });
  return { records, indexes, refused };
}

/** Why a record is not taken from this caller: not a record, or not a run of its App that its pod ran. */
function whyNotStorable(item: unknown, caller: CollectorCaller, validate: ValidateFunction<RunRecordWithResult>): string | undefined {
  if (!validate(item)) {
    const [error] = validate.errors ?? [];
    return `not a run record: ${error?.instancePath || '(the record)'} ${error?.message ?? 'is invalid'}`;
  }
  if (item.projectId !== caller.namespace) return `of project ${item.projectId}, not ${caller.namespace}`;
  if (item.appName !== caller.appName) return `of app ${item.appName}, not ${caller.appName}, whose pod ${caller.podName} sent it`;
  if (item.replica !== caller.podName) return `run by replica ${item.replica}, not ${caller.podName}, which sent it`;
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

/** Whether a Content-Type names JSON (its media type, parameters aside), as fastify matches the collector's parser. */
function isJson(contentType: string | undefined): boolean {
  return contentType?.split(';', 1)[0]!.trim().toLowerCase() === 'application/json';
}

/** Refused before its body is read: answered now, and the connection closed rather than the body read and dropped. */
function refuseUnread(reply: FastifyReply, status: number, detail: string, retry = false): FastifyReply {
  reply.header('connection', 'close');
  return refuse(reply, status, detail, retry);
}

function refuse(reply: FastifyReply, status: number, detail: string, retry = false): FastifyReply {
  if (retry) reply.header('retry-after', '1');
  return reply.code(status).type('application/problem+json').send({ status, detail });
}
