import { defineConfig } from 'vitest/config';

// The unit tests StrykerJS runs against mutants of the approver, the CSR reader and the PEM
// reader (stryker.config.json; `npm run mutation`). Only unit tests: no API server.
export default defineConfig({
  test: {
    include: ['controller/identity/**/*.test.ts', 'api/pem.test.ts'],
    testTimeout: 60_000,
  },
});
