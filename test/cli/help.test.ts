// Every command explains itself.
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';

describe('runlet --help', () => {
  it('lists every command', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    for (const command of ['dev', 'runs', 'manifest', 'dockerfile', 'deploy', 'sidecar', 'operator', 'activator', 'namespace']) {
      expect(result.stdout).toMatch(new RegExp(`^  ${command} +\\S`, 'm'));
    }
  });

  it.each(['dev', 'runs', 'manifest', 'dockerfile', 'deploy', 'sidecar', 'operator', 'activator', 'namespace'])('runlet %s --help prints its usage', async (command) => {
    const result = await runCli([command, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^Usage: runlet ${command}`));
  });

  it('refuses an unknown command with the list of commands', async () => {
    const result = await runCli(['deplyo']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/unknown command "deplyo"[\s\S]*Commands:/);
  });
});
