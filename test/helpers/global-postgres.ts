// vitest globalSetup: finds the PostgreSQL server every test process shares, once for the whole
// run: DATABASE_URL when set, else the machine's server at 127.0.0.1:5432, else ONE embedded
// server for all test files (without this each test process would start its own). The URL
// reaches the test processes through GANTRY_TEST_DATABASE_URL, which they inherit: not through
// DATABASE_URL, which would turn every `gantry serve` a test spawns into a PostgreSQL gateway.
import { answers, LOCAL, startEmbedded } from './postgres.js';

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.GANTRY_TEST_DATABASE_URL ?? process.env.DATABASE_URL) return undefined;
  if (await answers(LOCAL)) {
    process.env.GANTRY_TEST_DATABASE_URL = LOCAL;
    return undefined;
  }
  const embedded = await startEmbedded();
  process.env.GANTRY_TEST_DATABASE_URL = embedded.url;
  return () => embedded.stop();
}
