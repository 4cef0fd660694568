import { createServer } from 'node:net';

/** A TCP port of 127.0.0.1 that was free a moment ago (for a server that must come back on the same port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
