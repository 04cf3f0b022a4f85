import { defineConfig } from 'vitest/config';

// The global setup runs in this process, before `test.env` applies to the workers.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export default defineConfig({
  // The package names examples/ import (@ratchet/client, …) are tsconfig.json's paths to the sources.
  resolve: { tsconfigPaths: true },
  test: {
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', POWERTOOLS_LOG_LEVEL: 'SILENT', POWERTOOLS_METRICS_DISABLED: 'true' },
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts', 'test/property/**/*.test.ts', 'test/stack/**/*.test.ts'] },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          // One moto server and one PostgreSQL server for the run (test/support/*-global-setup.ts); tests keep apart
          // by key, table or schema.
          globalSetup: ['test/support/dynamodb-global-setup.ts', 'test/support/postgres-global-setup.ts'],
          // Every JSON answer from Ratchet is held to docs/openapi.json: one it does not allow fails its test.
          setupFiles: ['test/support/openapi-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'packages',
          include: ['test/packages/**/*.test.ts'],
          // Builds and packs every package once (packages/build.ts); the tests install the tarballs into fresh apps
          // (the Next.js app on a PostgreSQL server of this project's own).
          globalSetup: ['test/support/packages-global-setup.ts', 'test/support/postgres-global-setup.ts'],
          testTimeout: 240_000,
          hookTimeout: 240_000,
        },
      },
    ],
  },
});
