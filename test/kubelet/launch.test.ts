// How a container becomes a local process: here, a volume mounted at /tmp (the restricted pods' writable
// /tmp), which cannot be honoured by rewriting paths since the process shares the host's /tmp.
import { describe, expect, it } from 'vitest';
import { containerLaunch } from './launch.ts';

const NO_OBJECTS = { configMap: async () => undefined, secret: async () => undefined };

describe('containerLaunch', () => {
  it('a /tmp volume becomes TMPDIR, while /tmp paths of the image and the container stay as they are; other mounts are rewritten', async () => {
    const launch = await containerLaunch(
      {
        name: 'app',
        image: 'web:1',
        args: ['--script', '/tmp/test-app/server.py', '--data', '/data/runs'],
        volumeMounts: [
          { name: 'tmp', mountPath: '/tmp' },
          { name: 'data', mountPath: '/data' },
        ],
      },
      {
        pod: { metadata: { name: 'web-1', namespace: 'team' }, spec: { containers: [] } },
        images: { web: { commands: { python3: ['/usr/bin/python3'] }, entrypoint: ['python3'], env: { PYTHONPATH: '/tmp/test-app' } } },
        source: NO_OBJECTS,
        volumeDirs: new Map([
          ['tmp', '/pods/web-1/volumes/tmp'],
          ['data', '/pods/web-1/volumes/data'],
        ]),
        ports: new Map(),
        podDir: '/pods/web-1',
      },
    );
    expect(launch.argv).toEqual(['/usr/bin/python3', '--script', '/tmp/test-app/server.py', '--data', '/pods/web-1/volumes/data/runs']);
    expect(launch.env).toMatchObject({ TMPDIR: '/pods/web-1/volumes/tmp', PYTHONPATH: '/tmp/test-app' });
  });

  it('a variable naming a file of the image gets the stand-in\'s copy of it, or nothing when the stand-in has none', async () => {
    const launch = await containerLaunch(
      {
        name: 'sidecar',
        image: 'runlet:1',
        command: ['runlet'],
        env: [
          { name: 'LD_PRELOAD', value: '/usr/local/lib/libjemalloc.so.2' },
          { name: 'CA_FILE', value: '/etc/ssl/ca.pem' },
          { name: 'OTHER', value: '/usr/local/lib/other.so' },
          { name: 'WORD', value: 'constructor' },
        ],
      },
      {
        pod: { metadata: { name: 'web-1', namespace: 'team' }, spec: { containers: [] } },
        images: { runlet: { commands: { runlet: ['/bin/true'] }, files: { '/usr/local/lib/libjemalloc.so.2': '', '/etc/ssl/ca.pem': '/machine/ca.pem' } } },
        source: NO_OBJECTS,
        volumeDirs: new Map(),
        ports: new Map(),
        podDir: '/pods/web-1',
      },
    );
    expect(launch.env).toMatchObject({ LD_PRELOAD: '', CA_FILE: '/machine/ca.pem', OTHER: '/usr/local/lib/other.so', WORD: 'constructor' });
  });
});
