// Command-line parsing shared by the commands: node:util's parseArgs, with every parse error reported as a
// usage error (exit 2, the command's usage after it), and flags that fall back to environment variables.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { CliError } from './cli-error.ts';

export function parseCommandArgs<const T extends ParseArgsOptionsConfig>(args: string[], options: T, usage: string) {
  try {
    return parseArgs({ args, options, allowPositionals: true });
  } catch (err) {
    throw new CliError(`${(err as Error).message}\n\n${usage}`, 2);
  }
}

/** A string flag that may instead come from the first set environment variable, else a default. */
export interface EnvBackedOption {
  env: readonly string[];
  default?: string;
}

/**
 * Parses string flags of a daemon command (`runlet sidecar`, `runlet operator`): a pod spec sets either flags
 * or environment variables. Returns a lookup: flag, else environment, else default.
 */
export function readEnvBackedOptions<Name extends string>(
  args: string[],
  table: Record<Name, EnvBackedOption>,
  usage: string,
): (name: Name) => string | undefined {
  const options = Object.fromEntries(Object.keys(table).map((name) => [name, { type: 'string' as const }]));
  const { values, positionals } = parseCommandArgs(args, options, usage);
  if (positionals.length > 0) throw new CliError(`unexpected argument "${positionals[0]}"\n\n${usage}`, 2);
  const flags = values as Record<string, string | undefined>;
  return (name) => {
    const spec = table[name];
    return flags[name] ?? spec.env.map((variable) => process.env[variable]).find((value) => value !== undefined && value !== '') ?? spec.default;
  };
}

/** A duration flag given in seconds (fractions allowed), as milliseconds: above 0 and at most `maxSeconds`. */
export function parseSecondsFlag(flag: string, value: string, maxSeconds: number): number {
  const seconds = Number(value);
  if (value.trim() === '' || !Number.isFinite(seconds) || seconds <= 0 || seconds > maxSeconds) {
    throw new CliError(`--${flag} must be a number of seconds above 0 and at most ${maxSeconds}, got "${value}"`, 2);
  }
  return Math.round(seconds * 1000);
}
