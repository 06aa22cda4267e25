// `runlet sidecar --keep-results`: refused with a clear message where results cannot be kept, or with a bad bound.
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';

const BASE = ['sidecar', '--project', 'demo', '--app', 'hello', '--auth', 'off'];

describe('runlet sidecar --keep-results', () => {
  it.each([
    [['--run-store', 'runlog', '--keep-results', 'on'], '--keep-results on needs --run-store sqlite or results: the RunLog store keeps no results'],
    [['--run-store', 'sqlite', '--keep-results', 'yes'], '--keep-results must be on or off, got "yes"'],
    [['--run-store', 'sqlite', '--keep-results', 'on', '--result-ttl', '0'], '--result-ttl must be an integer from 1 to 2592000, got "0"'],
    [['--run-store', 'results', '--keep-results', 'on', '--result-keep-bytes', '2e9'], '--result-keep-bytes must be an integer from 1 to 16777216, got "2e9"'],
  ])('%j is refused', async (args, message) => {
    const result = await runCli([...BASE, ...args]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
  });
});
