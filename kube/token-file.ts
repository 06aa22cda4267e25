// A bearer token kept in a file that is rewritten as the token rotates (kubelet refreshes projected
// service-account tokens well before they expire): re-read at most once a minute, as client-go and client-node do.
import { readFile } from 'node:fs/promises';

export const TOKEN_FILE_MAX_AGE_MS = 60_000;

export class TokenFile {
  readonly path: string;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  #cached: { token: string; readAt: number } | undefined;

  constructor(path: string, options: { maxAgeMs?: number; now?: () => number } = {}) {
    this.path = path;
    this.#maxAgeMs = options.maxAgeMs ?? TOKEN_FILE_MAX_AGE_MS;
    this.#now = options.now ?? (() => performance.now());
  }

  async read(): Promise<string> {
    const now = this.#now();
    if (this.#cached !== undefined && now - this.#cached.readAt < this.#maxAgeMs) return this.#cached.token;
    let text;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      throw new Error(`cannot read the bearer token file ${this.path}: ${(error as Error).message}`, { cause: error });
    }
    // A trailing newline is common in token files and not allowed in a header value.
    const token = text.trim();
    if (token === '') throw new Error(`the bearer token file ${this.path} is empty`);
    this.#cached = { token, readAt: now };
    return token;
  }
}
