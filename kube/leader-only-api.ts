// A client whose writes stop the moment its replica stops leading: a reconcile in hand when the lease is
// lost (a renew deadline passed, another holder) fails at its next write instead of writing over what the new
// leader writes. One boolean check per request; reads go through, they change nothing.
import { KubeApi, type KubeApiOptions, type KubeRequest } from './client.ts';
import type { KubeCredentials } from './credentials.ts';
import type { KubePath } from './paths.ts';

export class NotLeaderError extends Error {
  constructor(what: string) {
    super(`${what}: refused, this replica is no longer the leader`);
    this.name = 'NotLeaderError';
  }
}

export class LeaderOnlyApi extends KubeApi {
  readonly #isLeader: () => boolean;

  constructor(credentials: KubeCredentials, options: KubeApiOptions, isLeader: () => boolean) {
    super(credentials, options);
    this.#isLeader = isLeader;
  }

  override request(method: string, path: KubePath, request?: KubeRequest): Promise<unknown> {
    if (method !== 'GET' && !this.#isLeader()) return Promise.reject(new NotLeaderError(`${method} ${path.toString()}`));
    return super.request(method, path, request);
  }
}
