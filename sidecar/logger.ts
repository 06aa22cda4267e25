// pino writing asynchronously: a log line never blocks a run on the terminal or a pipe. A person at a terminal
// (`runlet dev`) gets one readable line per event instead of JSON; pipes, files and collectors always get JSON.
import { createRequire } from 'node:module';
import pino, { type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';

/** pino-pretty is loaded only for a terminal: it is ~8 MB of RSS a pod's sidecar would carry for nothing. */
const require = createRequire(import.meta.url);

export function createLogger(options: { level?: string; name: string; readable?: boolean }): Logger {
  const level = options.level ?? process.env.RUNLET_LOG_LEVEL ?? 'info';
  if (!options.readable) return pino({ name: options.name, level }, pino.destination({ dest: 2, sync: false }));
  const pretty = require('pino-pretty') as typeof PinoPretty;
  return pino(
    { name: options.name, level },
    pretty({
      destination: 2,
      sync: false,
      colorize: true,
      translateTime: 'SYS:HH:MM:ss',
      ignore: 'pid,hostname,name',
      hideObject: true,
      messageFormat: (log, messageKey) => readableLine(log, String(log[messageKey] ?? '')),
    }),
  );
}

/** Fields pino adds to every line, not worth repeating to a person. */
const ENVELOPE = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'v']);

export function readableLine(log: Record<string, unknown>, message: string): string {
  if (message === 'run') {
    const reason = log.reason ? ` (${String(log.reason)})` : '';
    return `${String(log.app)} ${String(log.function)} ${String(log.mode)} → ${String(log.status)}${reason} ${String(log.statusCode)} in ${Number(log.durationMs).toFixed(1)} ms  ${String(log.runId)}`;
  }
  const details = Object.entries(log)
    .filter(([key]) => !ENVELOPE.has(key))
    .map(([key, value]) => (key === 'err' && value && typeof value === 'object' ? `\n${String((value as { stack?: unknown }).stack ?? JSON.stringify(value))}` : ` ${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`))
    .join('');
  return message + details;
}
