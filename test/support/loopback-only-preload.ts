// `node --import` this in a process the tests start (loopback-only.ts `node`): its connections to anything but
// the loopback throw, and each is appended to the file $RUNLET_TEST_REFUSED_DIALS for the test to find.
import { appendFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { guardConnect, REFUSED_DIALS_ENV } from './loopback-only.ts';

const log = process.env[REFUSED_DIALS_ENV];
guardConnect(Socket.prototype as unknown as Parameters<typeof guardConnect>[0], (where) => {
  if (log !== undefined && log !== '') appendFileSync(log, `${where} (pid ${process.pid}, ${process.argv.slice(1).join(' ')})\n`);
});
