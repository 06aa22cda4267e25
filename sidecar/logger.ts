// pino writing asynchronously: a log line never blocks a run on the terminal or a pipe.
import pino, { type Logger } from 'pino';

export function createLogger(options: { level?: string; name: string }): Logger {
  return pino(
    { name: options.name, level: options.level ?? process.env.RUNLET_LOG_LEVEL ?? 'info' },
    pino.destination({ dest: 2, sync: false }),
  );
}
