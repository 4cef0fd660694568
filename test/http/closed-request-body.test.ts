// A request whose client closed the connection before the gateway read its body (the client
// timed out while the gateway was paused; the gateway awaited a store read first): the read
// ends with 400 INCOMPLETE_BODY instead of waiting forever, and the body budget gets its bytes
// back. A real HTTP server and a raw TCP client that sends a whole request and closes at once.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createBodyBudget, governBody, readJsonBody } from '../../src/http/body.js';

describe('readJsonBody after the client closed', () => {
  it('rejects with INCOMPLETE_BODY and returns the budgeted bytes', async () => {
    const budget = createBodyBudget({ readTimeoutMs: 60_000, bytesInFlight: 1_000_000 });
    let arrived: (req: IncomingMessage) => void = () => undefined;
    const request = new Promise<IncomingMessage>((resolve) => (arrived = resolve));
    const server = createServer((req) => {
      governBody(req, budget);
      arrived(req);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
      socket.end('POST /v2/e/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{"input":{}}  ');
      const req = await request;
      // The handler reads the body only once the socket is gone, as after an awaited store read.
      if (!req.destroyed) await new Promise((resolve) => req.once('close', resolve));
      await expect(readJsonBody(req, 1_000)).rejects.toMatchObject({ status: 400, code: 'INCOMPLETE_BODY' });
      expect(budget.inFlight).toBe(0);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
