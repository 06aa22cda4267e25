// `runlet manifest APP_DIR`: the YAML `runlet deploy` would apply, for review or for `kubectl apply -f -`.
import { stringify } from 'yaml';
import { appManifests } from './app-folder.ts';
import { parseCommandArgs } from './arguments.ts';
import { CliError } from './cli-error.ts';

export const MANIFEST_USAGE = `Usage: runlet manifest APP_DIR [--namespace NS] [--image IMAGE]

Prints the App (and, for Python code, the ConfigMap holding it) that APP_DIR's service.toml describes.

Options:
  --namespace NS   the project: the namespace of the App (default: default)
  --image IMAGE    the app's code is baked into IMAGE (see runlet dockerfile) rather than shipped in a ConfigMap`;

export async function runManifestCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(args);
  const [appDir, ...extra] = positionals;
  if (!appDir || extra.length > 0) throw new CliError(`runlet manifest takes one APP_DIR\n\n${MANIFEST_USAGE}`, 2);
  const { app, code } = await appManifests(appDir, { namespace: values.namespace, image: values.image });
  const documents = code ? [code, app] : [app];
  process.stdout.write(documents.map((document) => stringify(document, { lineWidth: 0 })).join('---\n'));
  return 0;
}

function parse(args: string[]) {
  return parseCommandArgs(
    args,
    { namespace: { type: 'string', default: 'default' }, image: { type: 'string' } },
    MANIFEST_USAGE,
  );
}
