// runlet dev has no authentication by default and listens on loopback, where every page the user's browser has
// open can reach it: a page of another origin may call functions (the run interface is for that), but not drain
// runlet dev, cancel its runs or touch its keys. Its own dashboard, and clients that are not browsers, may.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { join } from 'node:path';
import { waitFor } from '../support/wait.ts';

const EVIL = 'http://attacker.example';
let dev: TestDevServer;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [join(FIXTURE_APPS, 'e2e')] });
});

afterAll(async () => {
  await dev?.dispose();
});

async function startLongRun(): Promise<string> {
  const accepted = await postJson(`${dev.url}/v4/dev/e2e/slow_items?async=true`, { n: 600, pause: 0.1 });
  expect(accepted.status).toBe(202);
  const runId = ((await accepted.json()) as { run_id: string }).run_id;
  await waitFor(async () => ((await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}`)).json()) as { item: { status: string } }).item.status === 'running', { what: 'the run running' });
  return runId;
}

describe('runlet dev and pages of other origins', () => {
  it("refuses another origin's page a cancel and a drain (GET included), and lets its own dashboard and curl do both", async () => {
    const runId = await startLongRun();
    const cancelUrl = `${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}/cancel`;

    for (const headers of [{ origin: EVIL }, { origin: 'null' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }]) {
      const refused = await fetch(cancelUrl, { method: 'POST', headers });
      expect(refused.status).toBe(403);
      expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(((await refused.json()) as { detail: string }).detail).toContain('may not POST');
      const drain = await fetch(`${dev.url}/admin/drain`, { headers });
      expect(drain.status).toBe(403);
    }
    expect((await fetch(`${dev.url}/admin/ready`)).status).toBe(200);
    const still = (await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}`)).json()) as { item: { status: string } };
    expect(still.item.status).toBe('running');

    // Reads are open to any page: nothing changes.
    expect((await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs`, { headers: { origin: EVIL } })).status).toBe(200);
    // The run interface too: a local front end of another origin calling a function is what it is for.
    expect((await fetch(`${dev.url}/v4/dev/e2e/greet`, { method: 'POST', headers: { origin: EVIL, 'content-type': 'application/json' }, body: '{"name":"x"}' })).status).toBe(200);

    // Its own page (as the dashboard sends it, under either loopback name) may cancel.
    const port = new URL(dev.url).port;
    expect((await fetch(cancelUrl, { method: 'POST', headers: { origin: `http://localhost:${port}`, 'sec-fetch-site': 'same-origin' } })).status).toBe(202);
    // A client that is not a browser sends neither header.
    const other = await startLongRun();
    expect((await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${other}/cancel`, { method: 'POST' })).status).toBe(202);
    expect((await fetch(`${dev.url}/admin/drain`, { headers: { 'sec-fetch-site': 'none' } })).status).toBe(200);
  });
});
