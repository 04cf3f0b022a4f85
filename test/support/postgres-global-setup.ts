import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres.ts';

/** One PostgreSQL server for the run (test/support/postgres.ts); tests keep apart by schema. */
export default async function setup(project: TestProject) {
  const server = await startPostgres();
  project.provide('postgresUrl', server.url);
  project.provide('postgresDir', server.dir);
  return () => server.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
    postgresDir: string;
  }
}
