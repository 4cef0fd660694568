// deploy/nginx.conf in front of a real `gantry serve` (issue 26.2), run by Debian's nginx with
// only its paths, ports and upstream changed (test/helpers/nginx.ts): TLS with a self-signed
// certificate; the SSE stream and the OpenAI stream arrive chunk by chunk (a chunk is read while
// the worker is held before its next word, so nothing waits for the end); a runsync hold longer
// than nginx's default 60 s read timeout is answered, not cut; a 20 MB body passes and a 21 MB
// one is refused with a JSON 413; /metrics is not exposed; plain HTTP is sent to HTTPS; the
// gateway believes X-Forwarded-For only from the proxy (GANTRY_TRUSTED_PROXIES).
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEndpoint, newKey } from '../helpers/jobs.js';
import { hasNginx, httpsCall, NGINX_CONF, startNginx, type Nginx } from '../helpers/nginx.js';
import { spawnOwned } from '../helpers/processes.js';
import { scratchDir } from '../helpers/scratch.js';
import { CLI, startGateway, type ServeProcess } from '../helpers/serve-process.js';

const LLM = fileURLToPath(new URL('../../dist/examples/llm-toy-worker.js', import.meta.url));
const MODEL = 'gantry-toy-llm';

describe.runIf(hasNginx || process.env.CI === 'true')('deploy/nginx.conf in front of a gateway', () => {
  let gw: ServeProcess;
  let proxy: Nginx;
  let llm: string;
  let quiet: string;
  let runKey: string;
  const hold = join(scratchDir('nginx-hold'), 'hold');
  beforeAll(async () => {
    gw = await startGateway({ env: { GANTRY_TRUSTED_PROXIES: '127.0.0.1', GANTRY_LOG_LEVEL: 'debug' } });
    proxy = await startNginx([new URL(gw.url).host]);
    llm = await newEndpoint(gw, {}, 'llm');
    quiet = await newEndpoint(gw, {}, 'quiet');
    runKey = await newKey(gw, ['run', 'read']);
    const workerKey = await newKey(gw, ['worker']);
    spawnOwned(process.execPath, [CLI, 'worker', LLM, '--url', gw.url, '--endpoint', llm, '--key', workerKey], { stdio: 'ignore', env: { ...process.env, LLM_TOY_HOLD_FILE: hold } });
  }, 180_000);
  afterAll(async () => {
    await proxy?.stop();
    await gw?.stop();
  });
  const auth = (): Record<string, string> => ({ authorization: `Bearer ${runKey}` });

  it('states the holds, the body limit and unbuffered streams, and nginx -t accepts it', () => {
    const conf = readFileSync(NGINX_CONF, 'utf8');
    const seconds = (name: string): number => Number(new RegExp(`^\\s*${name} (\\d+)s;`, 'm').exec(conf)?.[1]);
    expect(seconds('proxy_read_timeout')).toBeGreaterThanOrEqual(300); // runsync and status-sync: ?wait= up to 300 s (90 s by default)
    expect(seconds('keepalive_timeout')).toBeGreaterThanOrEqual(300);
    expect(conf).toMatch(/^\s*client_max_body_size 20m;/m);
    expect(conf).toMatch(/^\s*proxy_buffering off;/m);
    expect(conf).toMatch(/^\s*proxy_set_header X-Forwarded-For \$remote_addr;/m);
    expect(conf).toMatch(/^\s*keepalive \d+;/m);
  });

  /** Reads a stream through the proxy; the first chunk matching `content` must come while the worker is held. */
  async function heldStream(send: (onChunk: (text: string) => void) => Promise<{ status: number; text: string }>, content: RegExp): Promise<string> {
    writeFileSync(hold, '');
    let seenWhileHeld = false;
    const answer = await send((chunk) => {
      if (!seenWhileHeld && content.test(chunk) && existsSync(hold)) {
        seenWhileHeld = true;
        rmSync(hold); // the rest of the words may come now
      }
    });
    rmSync(hold, { force: true });
    expect(answer.status).toBe(200);
    expect(seenWhileHeld).toBe(true);
    return answer.text;
  }

  it('passes the OpenAI stream chunk by chunk', async () => {
    const text = await heldStream(
      async (onChunk) =>
        httpsCall(proxy, 'POST', `/v2/${llm}/openai/v1/chat/completions`, {
          headers: auth(),
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'tell me about proxies' }], stream: true, max_tokens: 8 }),
          onChunk,
        }),
      /data: \{.*"choices"/,
    );
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  }, 120_000);

  it('passes the SSE stream of /stream chunk by chunk', async () => {
    writeFileSync(hold, '');
    const submitted = await httpsCall(proxy, 'POST', `/v2/${llm}/run`, {
      headers: auth(),
      body: JSON.stringify({ input: { openai_route: '/v1/completions', openai_input: { model: MODEL, prompt: 'sse through nginx', stream: true, max_tokens: 8 } } }),
    });
    expect(submitted.status).toBe(200);
    const { id } = JSON.parse(submitted.text) as { id: string };
    const text = await heldStream((onChunk) => httpsCall(proxy, 'GET', `/v2/${llm}/stream/${id}`, { headers: { ...auth(), accept: 'text/event-stream' }, onChunk }), /"choices"/);
    expect(text).toMatch(/COMPLETED/);
  }, 120_000);

  it('holds a runsync longer than nginx’s default 60 s read timeout', async () => {
    const r = await httpsCall(proxy, 'POST', `/v2/${quiet}/runsync?wait=65000`, { headers: auth(), body: JSON.stringify({ input: { n: 1 } }) });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toMatchObject({ status: 'IN_QUEUE' });
  }, 150_000);

  it('passes a 20 MB body and refuses a 21 MB one with a JSON 413', async () => {
    const body = (bytes: number): string => {
      const shell = '{"input":{"blob":""}}';
      return `{"input":{"blob":"${'x'.repeat(bytes - shell.length)}"}}`;
    };
    const fits = await httpsCall(proxy, 'POST', `/v2/${quiet}/runsync?wait=1000`, { headers: auth(), body: body(20_000_000) });
    expect(fits.status).toBe(200);
    expect(JSON.parse(fits.text)).toMatchObject({ status: 'IN_QUEUE' });
    const big = await httpsCall(proxy, 'POST', `/v2/${quiet}/runsync?wait=1000`, { headers: auth(), body: body(21_000_000) });
    expect(big.status).toBe(413);
    expect(big.headers['content-type']).toMatch(/application\/json/);
    expect(JSON.parse(big.text)).toEqual({ error: 'Request body larger than 20 MB', code: 'PAYLOAD_TOO_LARGE' });
  }, 120_000);

  it('does not expose /metrics; sends plain HTTP to HTTPS', async () => {
    expect((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminKey}` } })).status).toBe(200);
    const metrics = await httpsCall(proxy, 'GET', '/metrics');
    expect(metrics.status).toBe(404);
    expect(JSON.parse(metrics.text)).toMatchObject({ code: 'NOT_FOUND' });
    const plain = await fetch(`${proxy.httpUrl}/healthz`, { redirect: 'manual' });
    expect(plain.status).toBe(308);
    expect(plain.headers.get('location')).toMatch(/^https:\/\/127\.0\.0\.1.*\/healthz$/);
    const health = await httpsCall(proxy, 'GET', '/healthz');
    expect(JSON.parse(health.text)).toMatchObject({ ok: true });
  });

  it('the gateway believes X-Forwarded-For from the proxy only, which sets it to the client it saw', async () => {
    const id = (): string => `xff-${randomBytes(6).toString('hex')}`;
    const logged = async (requestId: string): Promise<unknown> => (await gw.waitForLog((l) => l.requestId === requestId && l.msg === 'request', requestId)).client;
    // Through nginx a client's own header is replaced with the address nginx saw.
    const viaProxy = id();
    await httpsCall(proxy, 'GET', '/healthz', { headers: { 'x-forwarded-for': '203.0.113.66', 'x-request-id': viaProxy } });
    expect(await logged(viaProxy)).toBe('127.0.0.1');
    // The proxy's address (trusted) naming a client: that client is logged.
    const fromProxy = id();
    await fetch(`${gw.url}/healthz`, { headers: { 'x-forwarded-for': '198.51.100.7', 'x-request-id': fromProxy } });
    expect(await logged(fromProxy)).toBe('198.51.100.7');
  });
});
