// Reads and validates the JSON object body of a Python-runtime call. The raw bytes are forwarded unchanged:
// parsing here only proves the body is a JSON object, so the runtime never sees a malformed call.
import type { Readable } from 'node:stream';
import { Problems } from './errors.ts';
import { ProblemError } from './problem.ts';

const EMPTY_OBJECT = Buffer.from('{}');

export async function readJsonObjectBody(
  body: Readable | undefined,
  contentLength: string | undefined,
  limitBytes: number,
): Promise<Buffer> {
  const raw = body ? await readLimitedBody(body, contentLength, limitBytes) : EMPTY_OBJECT;
  if (raw.length === 0) return EMPTY_OBJECT;
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new ProblemError(Problems.invalidJson, `The body could not be parsed as JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProblemError(
      Problems.bodyNotObject,
      `The body must be a JSON object of named arguments, got ${describeJsonValue(value)}`,
    );
  }
  return raw;
}

/** Refuses (413) a body whose declared length is over the limit, before any of it is read or forwarded. */
export function assertDeclaredLength(body: Readable | undefined, contentLength: string | undefined, limitBytes: number): void {
  if (contentLength !== undefined && Number(contentLength) > limitBytes) {
    body?.resume();
    throw tooLarge(Number(contentLength), limitBytes);
  }
}

/** The whole body, refused with 413 as soon as it is known to exceed the limit. */
export async function readLimitedBody(body: Readable, contentLength: string | undefined, limitBytes: number): Promise<Buffer> {
  assertDeclaredLength(body, contentLength, limitBytes);
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    length += (chunk as Buffer).length;
    if (length > limitBytes) {
      body.destroy();
      throw tooLarge(length, limitBytes);
    }
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
}

function tooLarge(bytes: number, limitBytes: number): ProblemError {
  return new ProblemError(
    Problems.bodyTooLarge,
    `The body is larger than the limit of ${limitBytes} bytes (at least ${bytes} bytes were sent)`,
  );
}

function describeJsonValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
