// Preloaded into a child process (node --import) to list the modules it loads: each one's URL is appended to
// the file RUNLET_TEST_MODULE_LOG names as it loads, so the list is complete whenever the test reads it.
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const log = process.env.RUNLET_TEST_MODULE_LOG;
if (!log) throw new Error('record-modules.ts: set RUNLET_TEST_MODULE_LOG to the file to append module URLs to');

registerHooks({
  load(url, context, nextLoad) {
    appendFileSync(log, `${url}\n`);
    return nextLoad(url, context);
  },
});
