// Verified tokens, remembered until they expire, so a repeat caller costs one map lookup instead of a signature
// check. Only verification success is ever stored; a failed token is checked afresh every time.
import { LRUCache } from 'lru-cache';

/** What verification established about a token: all a later request needs. */
export interface VerifiedToken {
  readonly projectId: string;
  /**
   * When the token must be verified again, never later than its `exp`: in epoch ms as verification reports it,
   * on the cache's own clock once cached.
   */
  readonly expiresAtMs: number;
  /**
   * An API key's token refused as another project's before its key was looked up: it stands for its refusal
   * there, never for an admission in its own project (that asks whether the key was revoked first).
   */
  readonly keyUnchecked?: true;
}

export interface TokenCacheLimits {
  maxEntries: number;
  /** Bound on the summed length of the cached credentials. */
  maxChars: number;
}

/** Per-entry bookkeeping of the LRU besides the credential string itself, roughly, in characters. */
const ENTRY_OVERHEAD_CHARS = 128;

export class TokenCache {
  // Expiry is checked here against the caller's clock rather than with lru-cache's TTL, whose clock is its own
  // and whose stale checks may arm timers on the hot path.
  readonly #entries: LRUCache<string, VerifiedToken>;

  constructor(limits: TokenCacheLimits) {
    this.#entries = new LRUCache<string, VerifiedToken>({
      max: limits.maxEntries,
      maxSize: limits.maxChars,
      sizeCalculation: (_token, credential) => credential.length + ENTRY_OVERHEAD_CHARS,
    });
  }

  /**
   * The verified token cached for this credential, if it has not expired at `nowMs`. Allocation-free on a hit.
   * The credential is the whole `Authorization` value: keying by it spares slicing the token out of it.
   */
  get(credential: string, nowMs: number): VerifiedToken | undefined {
    const token = this.#entries.get(credential);
    if (token === undefined) return undefined;
    if (nowMs < token.expiresAtMs) return token;
    this.#entries.delete(credential);
    return undefined;
  }

  /** Remembers a verified token; one already expired at `nowMs` is not stored. */
  set(credential: string, token: VerifiedToken, nowMs: number): void {
    // A credential longer than the whole bound is refused by the LRU, leaving it to be verified each time.
    if (nowMs < token.expiresAtMs) this.#entries.set(credential, token);
  }

  clear(): void {
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }
}
