// What listing the calls held at zero costs (activator/hold-control.ts): a holder holding 1,000 calls (4 Apps ×
// the 250 a holder holds per App) answers the operator's signed `GET /.runlet/held/<namespace>/<app>` for one of
// those Apps, 2,000 times in a row over one keep-alive connection on loopback: the latency of each answer (p50,
// p99), its size, and the holder's CPU per answer. The hold itself costs no API write: nothing is measured there.
// Run: `npm run bench:held-list`.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { answerHoldControl, HeldCallIndex, HOLD_CONTROL_HEADER, holdControlPath, signHoldControl } from '../../activator/hold-control.ts';
import { newRunId } from '../../run-request/run-id.ts';

const APPS = 4;
const PER_APP = 250;
const ROUNDS = 2000;
const key = new Uint8Array(32).fill(7);
const index = new HeldCallIndex();
for (let app = 0; app < APPS; app += 1) {
  for (let call = 0; call < PER_APP; call += 1) {
    const webhook = call % 2 === 0 ? `&webhookEndpoint=${encodeURIComponent('https://hooks.example.com/runlet/done')}` : '';
    index.add({ runId: newRunId(), namespace: 'team-a', appName: `app-${app}`, method: 'POST', url: `/v4/team-a/app-${app}/run?x=1${webhook}`, headers: {}, acceptedAt: Date.now(), mode: 'sync', cancel: () => {} });
  }
}
const server = createServer((request, response) => answerHoldControl(request, response, { key, index, identity: 'runlet-activator-0' }));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as AddressInfo;
const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
const path = holdControlPath('team-a', 'app-0');
const latencies: number[] = [];
let bytes = 0;
const cpuBefore = process.cpuUsage();
for (let round = 0; round < ROUNDS; round += 1) {
  const started = performance.now();
  const answer = await pool.request({ method: 'GET', path, headers: { [HOLD_CONTROL_HEADER]: signHoldControl(key, 'GET', path, Date.now()) } });
  const text = await answer.body.text();
  latencies.push(performance.now() - started);
  if (answer.statusCode !== 200) throw new Error(`the holder answered ${answer.statusCode}: ${text}`);
  bytes = text.length;
}
// Client and server share this process: the CPU is both sides', an upper bound for the holder's.
const cpu = process.cpuUsage(cpuBefore);
latencies.sort((a, b) => a - b);
const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(2);
console.log(`held calls: ${APPS * PER_APP} (${PER_APP} of the App listed); ${ROUNDS} lists`);
console.log(`answer: ${(bytes / 1024).toFixed(1)} KiB, ${PER_APP} runs; latency p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`);
console.log(`CPU (client and holder together): ${((cpu.user + cpu.system) / 1000 / ROUNDS).toFixed(2)} ms a list`);
await pool.close();
server.close();
