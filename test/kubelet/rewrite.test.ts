// How container strings are redirected to local paths and ports.
import { describe, expect, it } from 'vitest';
import { expandReferences } from './env.ts';
import { portFlagValues, rewriteArgv, rewriteEnvValue, type Rewrites } from './rewrite.ts';

const rewrites: Rewrites = {
  ports: new Map([
    [8000, 41000],
    [8001, 41001],
    [8192, 41192],
  ]),
  mounts: [
    { mountPath: '/app', localPath: '/tmp/pod/volumes/code' },
    { mountPath: '/var/run', localPath: '/tmp/pod/volumes/run' },
    { mountPath: '/var/run/runlet/', localPath: '/tmp/pod/volumes/data' },
  ],
};

describe('rewriteArgv', () => {
  it('maps the known ports of port flags, in both spellings, and leaves other numbers alone', () => {
    expect(rewriteArgv(['--port', '8000', '--admin-port=8001', '--app-port', '8192', '--concurrency', '8000', '-p', '8000'], rewrites)).toEqual([
      '--port',
      '41000',
      '--admin-port=41001',
      '--app-port',
      '41192',
      '--concurrency',
      '8000',
      '-p',
      '8000',
    ]);
    expect(rewriteArgv(['--port', '9999'], rewrites)).toEqual(['--port', '9999']);
  });

  it('maps paths under a mountPath, the longest mountPath winning, and loopback host:port pairs', () => {
    expect(
      rewriteArgv(['--app-dir', '/app', '/app/main.py', '--data-dir=/var/run/runlet', '/var/run/x', '/application', 'http://127.0.0.1:8192/x'], rewrites),
    ).toEqual([
      '--app-dir',
      '/tmp/pod/volumes/code',
      '/tmp/pod/volumes/code/main.py',
      '--data-dir=/tmp/pod/volumes/data',
      '/tmp/pod/volumes/run/x',
      '/application',
      'http://127.0.0.1:41192/x',
    ]);
  });

  it('finds the ports port flags name', () => {
    expect(portFlagValues(['--port', '8000', '--admin-port=8001', '--workers', '4', '--app-port', 'x'])).toEqual([8000, 8001]);
  });
});

describe('rewriteEnvValue', () => {
  it('maps a PORT variable holding a known port, path lists and URLs; leaves the rest', () => {
    expect(rewriteEnvValue('RUNLET_APP_PORT', '8192', rewrites)).toBe('41192');
    expect(rewriteEnvValue('CONCURRENCY', '8000', rewrites)).toBe('8000');
    expect(rewriteEnvValue('PYTHONPATH', '/app:/usr/lib/python3', rewrites)).toBe('/tmp/pod/volumes/code:/usr/lib/python3');
    expect(rewriteEnvValue('UPSTREAM', 'http://localhost:8000/v4', rewrites)).toBe('http://localhost:41000/v4');
    expect(rewriteEnvValue('REMOTE', 'http://example.com:8000/', rewrites)).toBe('http://example.com:8000/');
  });
});

describe('expandReferences', () => {
  it('expands $(VAR) of defined variables, keeps unknown references and unescapes $$', () => {
    const defined = new Map([['NAME', 'web']]);
    expect(expandReferences('$(NAME)-$(MISSING)-$$(NAME)', defined)).toBe('web-$(MISSING)-$(NAME)');
  });
});
