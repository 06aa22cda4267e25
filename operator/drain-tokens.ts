// Which drain token each App's Deployment is rendered with (render/drain-token.ts): the one its live
// Deployment carries, else the one this operator rendered last (the Deployment watch may not have seen its
// own create yet), else a new one. Kept per App name with its uid, so an App deleted and made again gets a
// new token.
import type { App } from '../crds/app-schema.ts';
import { newDrainToken } from '../sidecar/drain-token.ts';

export class DrainTokens {
  readonly #rendered = new Map<string, { uid: string | undefined; token: string }>();

  /** The token to render `app` with; `live`: the token its Deployment carries now (the watch's cache). */
  tokenFor(app: App, live: string | undefined): string {
    const key = `${app.metadata.namespace}/${app.metadata.name}`;
    const remembered = this.#rendered.get(key);
    const token = live ?? (remembered?.uid === app.metadata.uid ? remembered?.token : undefined) ?? newDrainToken();
    this.#rendered.set(key, { uid: app.metadata.uid, token });
    return token;
  }

  /** The App is gone: its token goes with it. */
  forget(namespace: string, name: string): void {
    this.#rendered.delete(`${namespace}/${name}`);
  }
}
