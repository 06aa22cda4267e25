import { describe, expect, it } from 'vitest';
import { SidecarMetrics } from './metrics.ts';

describe('SidecarMetrics', () => {
  it('counts the time webhook attempts waited for a connection to their receiver, beside their outcomes', async () => {
    const metrics = new SidecarMetrics({ inFlight: () => 0, queued: () => 0 });
    metrics.webhookAttempt({ kind: 'response', statusCode: 204 }, 0.2);
    metrics.webhookAttempt({ kind: 'timeout', message: 'not sent: no connection to the receiver came free' }, 600_000);

    const text = await metrics.registry.metrics();
    expect(text).toContain('runlet_webhook_connection_wait_seconds_count 2');
    expect(text).toContain('runlet_webhook_connection_wait_seconds_bucket{le="0.001"} 1');
    expect(text).toContain('runlet_webhook_connection_wait_seconds_sum 600.0002');
    expect(text).toContain('runlet_webhook_attempts_total{outcome="2xx"} 1');
    expect(text).toContain('runlet_webhook_attempts_total{outcome="timeout"} 1');
  });
});
