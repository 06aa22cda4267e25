// A pod's process dials another pod at its pod IP (the operator scraping a replica's load): with the kubelet's
// published map and the preload, the connection goes to the loopback port standing for it; an address the map
// does not hold is still refused by the loopback guard, before any packet.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { REFUSED_DIALS_ENV } from '../support/loopback-only.ts';
import { POD_NETWORK_ENV, POD_NETWORK_PRELOAD, publishDialMap } from './pod-network-dials.ts';

const GUARD_PRELOAD = join(import.meta.dirname, '../support/loopback-only-preload.ts');

let dir: string;
let server: Server;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'runlet-pod-network-'));
  server = createServer((request, response) => response.end(`answered ${request.url}`));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterEach(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A guarded process with the pod network's preload, asking `url` with node:http; its output. */
async function dialFromPod(url: string): Promise<string> {
  const script = `
    import { get } from 'node:http';
    try {
      get(${JSON.stringify(url)}, (answer) => { let body = ''; answer.on('data', (c) => (body += c)); answer.on('end', () => console.log(body)); })
        .on('error', (error) => console.log('error: ' + error.message));
    } catch (error) {
      console.log('error: ' + error.message);
    }`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', GUARD_PRELOAD, '--import', POD_NETWORK_PRELOAD, '--input-type=module', '-e', script], {
    env: { ...process.env, [POD_NETWORK_ENV]: join(dir, 'pod-network.json'), [REFUSED_DIALS_ENV]: join(dir, 'refused.log') },
  });
  return stdout.trim();
}

function refused(): string {
  try {
    return readFileSync(join(dir, 'refused.log'), 'utf8');
  } catch {
    return '';
  }
}

describe('pod IPs dialled from a pod’s process', () => {
  it('reach the loopback port the kubelet published for them; an unpublished one is refused before any packet', async () => {
    const local = (server.address() as AddressInfo).port;
    publishDialMap(join(dir, 'pod-network.json'), { '192.0.2.77': { '8001': local } });
    expect(await dialFromPod('http://192.0.2.77:8001/load')).toBe('answered /load');
    expect(refused()).toBe('');

    expect(await dialFromPod('http://192.0.2.78:8001/load')).toMatch(/^error: connection to 192\.0\.2\.78:8001 refused/);
    expect(refused()).toContain('192.0.2.78:8001');
    // A port of the pod that is not published is not guessed either.
    expect(await dialFromPod('http://192.0.2.77:9999/load')).toMatch(/^error: connection to 192\.0\.2\.77:9999 refused/);
  });
});
