// undici, loaded on first use. It is ~13 MB of a sidecar's RSS (its target is 80 MB), and a Python app's
// sidecar needs it only once a webhook is delivered; custom apps' proxies and token key sets need it too.
// Synchronous (undici is CommonJS) so the classes that use it keep synchronous constructors and getters.
import { createRequire } from 'node:module';

type Undici = typeof import('undici');

const require = createRequire(import.meta.url);
let loaded: Undici | undefined;

export function undici(): Undici {
  loaded ??= require('undici') as Undici;
  return loaded;
}
