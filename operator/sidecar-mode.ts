// Whether pods get the sidecar as a native sidecar (an init container with restartPolicy Always). Servers
// before 1.29 drop restartPolicy from init containers (SidecarContainers is beta and on from 1.29): the
// sidecar would then be an init container that never completes and the pod would never start. So `auto`
// asks the API server's version; `true`/`false` override it (a cluster whose feature gates differ). A build
// that stamps no version (`v0.0.0-master`, empty major and minor: the test tier's Debian kube-apiserver 1.20)
// reads as 0.0, so it gets the classic sidecar, which works on every version.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { KubeApi } from '../kube/client.ts';
import { isAtLeast, readServerVersion, type ServerVersion } from '../kube/server-version.ts';

export type NativeSidecarsSetting = 'auto' | boolean;

export function nativeSidecarsSupported(version: ServerVersion): boolean {
  return isAtLeast(version, 1, 29);
}

const RETRY = { initialMs: 500, maxMs: 30_000 };

/**
 * The setting, or for `auto` the server's answer. An unreadable `/version` is retried with backoff until
 * `signal` aborts: guessing would render pods that hang on one server version or lose the sidecar's ordering
 * on the other, and two replicas guessing differently would roll every App at each handover.
 */
export async function decideNativeSidecars(setting: NativeSidecarsSetting, api: KubeApi, logger: Logger, signal: AbortSignal): Promise<boolean> {
  if (setting !== 'auto') return setting;
  for (let delayMs = RETRY.initialMs; ; delayMs = Math.min(RETRY.maxMs, delayMs * 2)) {
    try {
      const version = await readServerVersion(api);
      const native = nativeSidecarsSupported(version);
      logger.info({ serverVersion: version.gitVersion, nativeSidecars: native }, native ? 'native sidecars: the server supports them' : 'classic sidecars: the server reports a version before 1.29');
      return native;
    } catch (error) {
      logger.warn({ err: error, retryInMs: delayMs }, 'cannot read the API server version (to choose native or classic sidecars); retrying');
    }
    await sleep(delayMs, undefined, { signal });
  }
}
