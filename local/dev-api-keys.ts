// `runlet dev`'s API keys: tokens signed with its auth key (`--auth-key-file`, run-request/auth/local-key.ts) for the
// expiry chosen, each with its own `jti`. The keys are listed from DATA_DIR/api-keys.json, which holds no token;
// a revoked key stays there, marked, until its token would have expired, so that its `jti` is refused after a
// restart too (the signature alone would still verify). Revoking clears the verified-token cache: refused at once.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { ApiKey, ApiKeyStore, CreatedApiKey } from '../management/api-keys.ts';
import { signLocalToken } from '../run-request/auth/local-key.ts';

interface StoredKey extends ApiKey {
  projectId: string;
  /** The `jti` of its token. */
  tokenId: string;
  revokedAt: string | null;
}

export interface LocalApiKeysOptions {
  dataDir: string;
  /** The auth key (HS256) of each project whose tokens runlet dev accepts. */
  signingKeys: Readonly<Record<string, Uint8Array>>;
  /** Called once a key is revoked: the run interface forgets the tokens it verified. */
  onRevoke: () => void;
}

const FILE_NAME = 'api-keys.json';

export class LocalApiKeys implements ApiKeyStore {
  readonly #file: string;
  readonly #signingKeys: Readonly<Record<string, Uint8Array>>;
  readonly #onRevoke: () => void;
  #keys: StoredKey[];
  /** Writes one after the other, so that the file ends as the last change left it. */
  #writing: Promise<void> = Promise.resolve();

  constructor(options: LocalApiKeysOptions) {
    this.#file = join(options.dataDir, FILE_NAME);
    this.#signingKeys = options.signingKeys;
    this.#onRevoke = options.onRevoke;
    this.#keys = readKeys(this.#file).filter((key) => Date.parse(key.expiresAt) > Date.now());
  }

  /** For the run authenticator (RunAuthConfig.revokedTokenIds). */
  readonly revokedTokenIds = {
    has: (tokenId: string): boolean => this.#keys.some((key) => key.tokenId === tokenId && key.revokedAt !== null),
  };

  /** Expired keys too, until runlet dev forgets them (at its next start, or the next key made). */
  async list(projectId: string): Promise<ApiKey[]> {
    return this.#keys.filter((key) => key.projectId === projectId && key.revokedAt === null).map(publicKey);
  }

  async create(projectId: string, name: string, expiresAt: Date): Promise<CreatedApiKey> {
    const signingKey = this.#signingKeys[projectId];
    if (signingKey === undefined) {
      throw new ProblemError(Problems.forbidden, `runlet dev has no auth key for project ${projectId}; it makes keys for the project it serves`);
    }
    const now = Date.now();
    if ((await this.list(projectId)).some((key) => key.name === name && Date.parse(key.expiresAt) > now)) {
      throw new ProblemError(Problems.keyExists, `project ${projectId} has an API key named ${name} already; revoke it first, or choose another name`);
    }
    const tokenId = randomUUID();
    // Whole seconds, as the token's `exp` has them.
    const expiry = new Date(Math.floor(expiresAt.getTime() / 1000) * 1000);
    const token = await signLocalToken({ projectId, key: signingKey, expiresIn: expiry, tokenId });
    const key: StoredKey = { projectId, name, tokenId, createdAt: new Date().toISOString(), expiresAt: expiry.toISOString(), revokedAt: null };
    // Expired keys are forgotten here: their tokens no longer verify, revoked or not.
    this.#keys = [...this.#keys.filter((old) => Date.parse(old.expiresAt) > now), key];
    await this.#save();
    return { item: publicKey(key), token };
  }

  async revoke(projectId: string, name: string): Promise<void> {
    const key = this.#keys.find((candidate) => candidate.projectId === projectId && candidate.name === name && candidate.revokedAt === null);
    if (key === undefined) throw new ProblemError(Problems.keyNotFound, `project ${projectId} has no API key named ${name}`);
    key.revokedAt = new Date().toISOString();
    this.#onRevoke();
    await this.#save();
  }

  #save(): Promise<void> {
    const text = `${JSON.stringify({ keys: this.#keys }, null, 2)}\n`;
    const temporary = `${this.#file}.${process.pid}.tmp`;
    // After the previous write, whether it succeeded or not: one failed write must not fail every later one.
    this.#writing = this.#writing.catch(() => undefined).then(async () => {
      await writeFile(temporary, text, { mode: 0o600 });
      await rename(temporary, this.#file);
    });
    return this.#writing;
  }
}

function publicKey({ name, createdAt, expiresAt }: StoredKey): ApiKey {
  return { name, createdAt, expiresAt };
}

function readKeys(file: string): StoredKey[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new Error(`cannot read the API keys of runlet dev from ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return (JSON.parse(text) as { keys: StoredKey[] }).keys;
  } catch (err) {
    throw new Error(`${file} is not the API keys file runlet dev writes (${(err as Error).message}); move it away to start without keys`, { cause: err });
  }
}
