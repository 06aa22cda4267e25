// What wakes the kubelet's reconcile loop: watches of Pods (and of Deployments, when the kubelet is also the
// Deployment controller) in every namespace (client-node informers, which relist after a 410 and re-watch
// after a cut). An informer stops on any other error; the feed restarts it after a delay, and asks for a
// reconcile, since events may have been missed meanwhile.
import {
  AppsV1Api,
  CoreV1Api,
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { LogFile } from './log-file.ts';

export class ChangeFeed {
  readonly #informers: Informer<KubernetesObject>[];
  readonly #retryTimers = new Set<NodeJS.Timeout>();
  #stopped = false;

  constructor(config: KubeConfig, log: LogFile, retryMs: number, onChange: () => void, watch: { deployments: boolean }) {
    const apps = config.makeApiClient(AppsV1Api);
    const core = config.makeApiClient(CoreV1Api);
    this.#informers = [makeInformer<KubernetesObject>(config, '/api/v1/pods', () => core.listPodForAllNamespaces())];
    if (watch.deployments) {
      this.#informers.push(makeInformer<KubernetesObject>(config, '/apis/apps/v1/deployments', () => apps.listDeploymentForAllNamespaces()));
    }
    for (const informer of this.#informers) {
      for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, () => onChange());
      informer.on('error', (error) => {
        if (this.#stopped) return;
        log.error('a watch failed; restarting it', error);
        const timer = setTimeout(() => {
          this.#retryTimers.delete(timer);
          if (this.#stopped) return;
          onChange();
          informer.start().catch((restartError: unknown) => log.error('restarting a watch failed', restartError));
        }, retryMs);
        this.#retryTimers.add(timer);
      });
    }
  }

  async start(): Promise<void> {
    await Promise.all(this.#informers.map((informer) => informer.start()));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#retryTimers) clearTimeout(timer);
    await Promise.all(this.#informers.map((informer) => informer.stop()));
  }
}
