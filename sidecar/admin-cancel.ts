// Cancelling a run through the pod's admin port: how the operator's management API reaches the replica that
// runs the call (operator/run-cancel.ts). The admin port listens on the pod IP, which every pod of the cluster
// reaches, so a cancel is signed: an HMAC of the request line and the time, under the App namespace's admin key.
// The operator makes that key, random for each namespace, in the namespace's Secret `runlet-admin-key`
// (operator/admin-keys.ts), which is mounted into the sidecar alone, as files the kubelet refreshes when the
// operator rotates it. Whoever may read Secrets in the namespace may cancel its runs — they could delete its
// pods anyway — and the key is worth nothing in any other namespace. The pod spec holds no secret.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FailureReason, RunRecord } from '../crds/run-record-schema.ts';

/**
 * The admin port's drain route, which the app container's preStop hook asks (GET): it drains only a pod being
 * deleted (pod-termination.ts), so it needs no secret.
 */
export const DRAIN_PATH = '/drain';
/** `POST /cancel/<run_id>` on the admin port, with ADMIN_SIGNATURE_HEADER. */
export const CANCEL_PATH = '/cancel';
/** `<issued at, epoch ms>.<hex HMAC-SHA256 of "<method> <path>;<issued at>">`. */
export const ADMIN_SIGNATURE_HEADER = 'x-runlet-admin-signature';
/** The Secret (one per App namespace) and its entries: the key the operator signs with, and the one before it. */
export const ADMIN_KEY_SECRET = 'runlet-admin-key';
export const ADMIN_KEY_CURRENT = 'current';
export const ADMIN_KEY_PREVIOUS = 'previous';
/** Where the sidecar finds the Secret's entries as files (render/sidecar-container.ts mounts it there). */
export const ADMIN_KEY_DIR = '/var/run/secrets/runlet/admin-key';

/**
 * How far a signature's time may be from the sidecar's clock, either way: a cancel is signed as it is sent, so
 * this covers only the skew between the operator's node and the app's. A cancel seen on the network is good
 * for its one run id and for no longer than this.
 */
export const ADMIN_SIGNATURE_MAX_AGE_MS = 5 * 60_000;
const KEY_BYTES = 32;

/** What a cancel the replica took answers (202): the run as it stood, and why it is stopping (another reason than a cancel: it was ending already). */
export interface AdminCancelAnswer {
  record: RunRecord;
  stoppedFor: FailureReason;
}

/** The admin path that cancels `runId`. */
export function adminCancelPath(runId: string): string {
  return `${CANCEL_PATH}/${encodeURIComponent(runId)}`;
}

/** A new admin key: 32 random bytes as hex (what the Secret's entries hold). */
export function newAdminKey(): string {
  return randomBytes(KEY_BYTES).toString('hex');
}

function mac(key: string, method: string, path: string, issuedAt: number): Buffer {
  return createHmac('sha256', Buffer.from(key, 'hex')).update(`${method} ${path};${issuedAt}`).digest();
}

/** The signature header's value for `method path`, made at `now`. */
export function signAdminRequest(key: string, method: string, path: string, now = Date.now()): string {
  const issuedAt = Math.round(now);
  return `${issuedAt}.${mac(key, method, path, issuedAt).toString('hex')}`;
}

/** Whether `value` signs `method path` under one of `keys`, made within ADMIN_SIGNATURE_MAX_AGE_MS of `now`. */
export function adminRequestSigned(keys: readonly string[], value: string | string[] | undefined, method: string, path: string, now = Date.now()): boolean {
  if (typeof value !== 'string') return false;
  const match = /^(\d{1,15})\.([0-9a-f]{64})$/.exec(value);
  if (match === null) return false;
  const issuedAt = Number(match[1]);
  if (Math.abs(now - issuedAt) > ADMIN_SIGNATURE_MAX_AGE_MS) return false;
  const given = Buffer.from(match[2]!, 'hex');
  // Every key is tried, so the time taken does not say which one (or whether any) matched.
  return keys.filter((key) => timingSafeEqual(mac(key, method, path, issuedAt), given)).length > 0;
}

/**
 * The keys a sidecar accepts, read from the mounted Secret in `dir` at each call (a cancel is rare; the kubelet
 * replaces the files when the operator rotates the key). None when the Secret is not there (yet): no cancel
 * is taken then.
 */
export async function readAdminKeys(dir: string): Promise<string[]> {
  const keys: string[] = [];
  for (const entry of [ADMIN_KEY_CURRENT, ADMIN_KEY_PREVIOUS]) {
    const text = await readFile(join(dir, entry), 'utf8').catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
      throw new Error(`reading the admin key ${join(dir, entry)}: ${(error as Error).message}`, { cause: error });
    });
    const key = text.trim();
    if (/^([0-9a-f]{2}){32,}$/i.test(key)) keys.push(key.toLowerCase());
  }
  return keys;
}
