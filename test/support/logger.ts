// Tests log nothing unless RUNLET_TEST_LOG names a level (e.g. RUNLET_TEST_LOG=debug npm test -- operator).
import pino, { type Logger } from 'pino';

export function testLogger(): Logger {
  return pino({ name: 'runlet-test', level: process.env.RUNLET_TEST_LOG ?? 'silent' });
}
