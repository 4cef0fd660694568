// vitest setupFiles: runs in every test file. Its afterAll runs after the file's own (hooks run
// in reverse order): whatever the file started through spawnOwned and did not stop — a gateway
// of a test that failed half-way, say — is killed with its process group before the next file.
import { afterAll } from 'vitest';
import { killOwned } from './processes.js';

afterAll(() => {
  killOwned();
});
