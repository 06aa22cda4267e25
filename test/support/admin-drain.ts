// What any caller gets from a sidecar's admin port while its pod is not being deleted: /drain refused (409) on
// GET and POST, a guessed drain-token path not found (404), and the replica ready still.
import { expect } from 'vitest';

export async function expectDrainRefusedToAll(adminUrl: string): Promise<void> {
  for (const path of ['/drain', '/drain/a-guessed-token-that-is-long-enough-0123456789']) {
    for (const method of ['GET', 'POST']) {
      const refused = await fetch(`${adminUrl}${path}`, { method });
      expect([method, path, refused.status]).toEqual([method, path, path === '/drain' ? 409 : 404]);
    }
  }
  const ready = await fetch(`${adminUrl}/ready`);
  expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready' }]);
}
