// The interpreter one Python app runs on in `runlet dev`: the one chosen (`--python`, else python3) when the app
// has nothing to install, else that of its virtual environment (python-environment.ts), built or reused. Asked
// before each start and reload of the app, so that a change of its dependencies is installed before it runs.
import type { Logger } from 'pino';
import { loadAppDir, type LoadedApp } from '../crds/service-toml.ts';
import { appRequirements } from './app-requirements.ts';
import type { Environment, Interpreter, PythonEnvironments } from './python-environment.ts';

export class AppEnvironment {
  readonly #app: LoadedApp;
  readonly #interpreter: () => Promise<Interpreter>;
  readonly #command: string;
  readonly #environments: PythonEnvironments;
  readonly #logger: Logger;
  /** The folder as read at start serves the first preparation; later ones read it again (it may have changed). */
  #loaded: LoadedApp | null;
  readonly #said = new Set<string>();
  /** The environment of the last preparation; null when the app had nothing to install. */
  current: Environment | null = null;

  constructor(options: { app: LoadedApp; command: string; interpreter: () => Promise<Interpreter>; environments: PythonEnvironments; logger: Logger }) {
    this.#app = options.app;
    this.#loaded = options.app;
    this.#command = options.command;
    this.#interpreter = options.interpreter;
    this.#environments = options.environments;
    this.#logger = options.logger.child({ app: options.app.name });
  }

  /** The interpreter to start the app with; throws what keeps it from starting (pip's own words among them). */
  async prepare(): Promise<string> {
    const app = this.#loaded ?? (await loadAppDir(this.#app.dir));
    this.#loaded = null;
    const requirements = await appRequirements(app);
    if (requirements === null) {
      this.current = null;
      return this.#command;
    }
    for (const note of requirements.notes) {
      if (this.#said.has(note)) continue;
      this.#said.add(note);
      this.#logger.warn(note);
    }
    // The routes are the name's at start: a renamed app needs a restart (README), its environment does not.
    this.current = await this.#environments.ensure(this.#app.name, requirements, await this.#interpreter());
    return this.current.python;
  }
}
