// The authenticator of a process that answers calls in the sidecars' place (the holder, in `runlet activator`
// or `runlet operator`): it trusts exactly what they trust, the issuer and audience they read from the same
// options and variables (run-request/auth/config.ts); in a pod, the API server's service-account issuer,
// reached with this pod's own service-account CA and token.
import type { Logger } from 'pino';
import { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { loadIssuerAuthConfig, type IssuerAuthOptionName } from '../run-request/auth/config.ts';
import { CliError } from './cli-error.ts';

/** `command` and `otherwise` name the command and what to do instead, in the errors. */
export function issuerAuthenticator(
  option: (name: IssuerAuthOptionName) => string | undefined,
  serviceAccountDir: string | undefined,
  logger: Logger,
  { command, otherwise }: { command: string; otherwise: string },
): RunAuthenticator {
  let config;
  try {
    config = loadIssuerAuthConfig(option, process.env, serviceAccountDir);
  } catch (error) {
    throw new CliError(`${command}: the holder's authentication: ${(error as Error).message}; ${otherwise}`, 2);
  }
  if (config.jwksUrl === undefined && config.issuer === undefined) {
    throw new CliError(
      `${command}: the holder authenticates callers as the sidecars do, against their token issuer: give --auth-jwks-url or ` +
        `--auth-issuer (in a pod, the API server's issuer is the default), ${otherwise}`,
      2,
    );
  }
  return new RunAuthenticator(config, { logger });
}
