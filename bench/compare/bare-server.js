#!/usr/bin/env node
/**
 * The machine's ceiling for bench/compare: a bare node:http server that reads the request body
 * and answers a small JSON like Gantry's /run answer (`{"id":…,"status":"IN_QUEUE"}`), with no
 * routing, auth or store. Listens on 127.0.0.1:$PORT; GET /healthz answers too.
 */
import http from 'node:http';

let n = 0;
const server = http.createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    const body = `{"id":"bare-${++n}","status":"IN_QUEUE"}`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
