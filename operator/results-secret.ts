// The embedded PostgreSQL's credentials (the chart's results.postgres.embedded): a random password and the
// libpq URL built from it, in a Secret of the operator's namespace, made by the operator at its first start
// when missing — so no password ships in install.yaml or the chart's defaults — and read when it exists (one a
// concurrent replica made, its create then a 409). The StatefulSet's PostgreSQL takes `password` from it at
// its first start (initdb); the operator uses `dsn` as it comes back from here, with no restart
// (cli/operator-command.ts).
import { randomBytes } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { KubeApi } from '../kube/client.ts';
import { isConflict } from '../kube/errors.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';

/** The role and database the chart's PostgreSQL is initialised with (POSTGRES_USER, POSTGRES_DB). */
export const RESULTS_DATABASE = 'runlet';
export const RESULTS_USER = 'runlet';
export const RESULTS_POSTGRES_PORT = 5432;

export interface ResultsSecretPlace {
  namespace: string;
  name: string;
  /** The embedded PostgreSQL's Service address, for the `dsn`. */
  host: string;
}

export interface ResultsCredentials {
  dsn: string;
  /** The Secret was made now (not found): whoever started with its `dsn` unset must read it again. */
  created: boolean;
}

/** 32 random bytes as hex: no character a URL would need to escape. */
function newPassword(): string {
  return randomBytes(32).toString('hex');
}

export function resultsDsn(password: string, host: string): string {
  return `postgres://${RESULTS_USER}:${password}@${host}:${RESULTS_POSTGRES_PORT}/${RESULTS_DATABASE}`;
}

function secretPath(place: ResultsSecretPlace, named = true): KubePath {
  const collection = KubePath.of({ version: 'v1', namespace: place.namespace, resource: 'secrets' });
  return named ? collection.named(place.name) : collection;
}

function dsnOf(secret: V1Secret, place: ResultsSecretPlace): string {
  const encoded = secret.data?.dsn;
  if (encoded === undefined || encoded === '') throw new Error(`the results Secret ${place.namespace}/${place.name} has no "dsn" entry`);
  return Buffer.from(encoded, 'base64').toString('utf8');
}

/** The embedded PostgreSQL's `dsn`: read from its Secret, or made with a new password and stored when missing. */
export async function ensureResultsSecret(api: KubeApi, place: ResultsSecretPlace): Promise<ResultsCredentials> {
  const found = await api.find<V1Secret & KubeObject>(secretPath(place));
  if (found !== undefined) return { dsn: dsnOf(found, place), created: false };
  const password = newPassword();
  const secret: V1Secret & KubeObject = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: place.name, namespace: place.namespace, labels: { 'app.kubernetes.io/part-of': 'runlet', 'app.kubernetes.io/component': 'postgres' } },
    data: {
      username: Buffer.from(RESULTS_USER).toString('base64'),
      password: Buffer.from(password).toString('base64'),
      dsn: Buffer.from(resultsDsn(password, place.host)).toString('base64'),
    },
  };
  try {
    return { dsn: dsnOf(await api.create(secretPath(place, false), secret), place), created: true };
  } catch (error) {
    // Another replica made it first: its password is the one PostgreSQL was (or will be) initialised with.
    if (!isConflict(error)) throw new Error(`creating the results Secret ${place.namespace}/${place.name}: ${(error as Error).message}`, { cause: error });
    return { dsn: dsnOf(await api.get<V1Secret & KubeObject>(secretPath(place)), place), created: false };
  }
}
