// `runlet dockerfile APP_DIR`: writes the Dockerfile that bakes an app's code into an image FROM the Python
// runtime image, with its [dependencies.pip] packages installed.
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { loadAppDir } from '../crds/service-toml.ts';
import { parseCommandArgs } from './arguments.ts';
import { CliError } from './cli-error.ts';
import { DEFAULT_PYTHON_RUNTIME_IMAGE } from './images.ts';

export const DOCKERFILE_USAGE = `Usage: runlet dockerfile APP_DIR [--base-image IMAGE] [--output FILE]

Writes APP_DIR/Dockerfile (or FILE; - for standard output): the Python runtime image with the app's code in
/app and its [dependencies.pip] packages installed. Build it, push it, then: runlet deploy APP_DIR --image IMAGE.

Options:
  --base-image IMAGE   the runtime image to build FROM (default ${DEFAULT_PYTHON_RUNTIME_IMAGE})
  --output FILE        where to write (default APP_DIR/Dockerfile)`;

export async function runDockerfileCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(args);
  const [appDir, ...extra] = positionals;
  if (!appDir || extra.length > 0) throw new CliError(`runlet dockerfile takes one APP_DIR\n\n${DOCKERFILE_USAGE}`, 2);
  const dir = resolve(appDir);
  const app = await loadAppDir(dir).catch((err: Error) => {
    throw new CliError(err.message);
  });
  if (app.spec.runtime.custom) {
    throw new CliError(`${app.name} is a custom-runtime app: it brings its own image ([runtime.custom] image); runlet dockerfile is for Python apps`);
  }
  const text = renderDockerfile({ baseImage: values['base-image'], pip: app.spec.pip ?? [] });
  const output = values.output ?? join(dir, 'Dockerfile');
  if (output === '-') process.stdout.write(text);
  else {
    await writeFile(output, text);
    process.stderr.write(`wrote ${output}; next: docker build -t IMAGE ${appDir} && docker push IMAGE && runlet deploy ${appDir} --image IMAGE\n`);
  }
  return 0;
}

export function renderDockerfile(options: { baseImage: string; pip: readonly string[] }): string {
  const lines = [
    '# Written by `runlet dockerfile`: the app\'s code baked into the Runlet Python runtime image.',
    `FROM ${options.baseImage}`,
    'USER root',
  ];
  if (options.pip.length > 0) {
    lines.push(`RUN pip install --no-cache-dir ${options.pip.map(shellQuote).join(' ')}`);
  }
  // The module is chosen by the App (spec.runtime.python.module), which the operator passes to the runtime.
  lines.push('COPY --chown=10001:10001 . /app', 'USER 10001', 'WORKDIR /app', '');
  return lines.join('\n');
}

function shellQuote(value: string): string {
  // Requirement specifiers carry shell metacharacters (`numpy>=2`): anything but plain names is quoted.
  return /^[A-Za-z0-9_.=+\-\[\],]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

function parse(args: string[]) {
  return parseCommandArgs(
    args,
    { 'base-image': { type: 'string', default: DEFAULT_PYTHON_RUNTIME_IMAGE }, output: { type: 'string' } },
    DOCKERFILE_USAGE,
  );
}
