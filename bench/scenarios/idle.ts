// Waits until a sidecar has no run in flight nor queued, or none of its records waiting for the collector, read
// from its Prometheus metrics.
const IDLE_TIMEOUT_MS = 120_000;
const POLL_MS = 50;

export async function waitUntilIdle(adminUrl: string): Promise<void> {
  const deadline = performance.now() + IDLE_TIMEOUT_MS;
  let last = '';
  while (performance.now() < deadline) {
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
    const inFlight = gauge(metrics, 'runlet_runs_in_flight');
    const queued = gauge(metrics, 'runlet_queue_depth');
    if (inFlight === 0 && queued === 0) return;
    last = `${inFlight} in flight, ${queued} queued`;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`the sidecar at ${adminUrl} was still busy after ${IDLE_TIMEOUT_MS} ms (${last})`);
}

/**
 * Waits until a sidecar of a cluster with a results store has every record it saved collected, read from its
 * Prometheus metrics: its memory is then what it keeps, not the backlog a collector on the same two cores let
 * build up.
 */
export async function waitUntilCollected(adminUrl: string): Promise<void> {
  const deadline = performance.now() + IDLE_TIMEOUT_MS;
  let buffered = Number.NaN;
  while (performance.now() < deadline) {
    buffered = gauge(await (await fetch(`${adminUrl}/metrics`)).text(), 'runlet_run_records_buffered');
    if (buffered === 0) return;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`the sidecar at ${adminUrl} still had ${buffered} run records waiting for the collector after ${IDLE_TIMEOUT_MS} ms`);
}

function gauge(metrics: string, name: string): number {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics);
  if (!match) throw new Error(`no ${name} in the sidecar's metrics`);
  return Number(match[1]);
}
