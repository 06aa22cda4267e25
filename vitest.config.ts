import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    // bench/.work/ holds, while the warm-path A/B runs, another commit's checkout: not this tree's tests.
    exclude: ['node_modules/**', 'dist/**', 'bench/.work/**'],
    // Real processes and servers: generous bounds for a loaded 2-core machine; tests wait on events, not time.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
