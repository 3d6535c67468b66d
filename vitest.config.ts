import { defineConfig } from 'vitest/config';

// Three projects, one per rung of the testing ladder (see docs/testing.md):
// unit tests sit next to the code; integration needs the real API server; e2e needs real systemd.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            '{api,kube,log,renderers,controller,agent,cli,hack}/**/*.test.ts',
            'test/unit/**/*.test.ts',
          ],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/support/**/*.test.ts'],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
