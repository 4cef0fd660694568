// Issue 25, item 1: links to the gateway's own files (the image endpoints' image_url) name the
// origin the client reached the gateway at, not the 127.0.0.1 the gateway calls itself; only
// links the gateway signed are touched, and GANTRY_PUBLIC_URL turns the rewriting off.
import type { IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createFileLinks, requestOrigin } from '../../src/http/file-links.js';
import { createLocalObjectStore, verifyFileSignature } from '../../src/images/object-store.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const request = (host: string | undefined, encrypted = false) => ({ headers: host === undefined ? {} : { host }, socket: { encrypted } }) as unknown as IncomingMessage;

describe('file links as the client reached the gateway', () => {
  const signingKey = randomBytes(32);
  const verify = (key: string, expires: string, sig: string) => verifyFileSignature(signingKey, key, expires, sig, Date.now());

  async function signedLink(): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-links-'));
    try {
      const store = createLocalObjectStore({ dir, baseUrl: 'http://127.0.0.1:8080', signingKey, ttlSeconds: 600 });
      return await store.put('images/ab/cd.png', new Uint8Array([1, 2, 3]), 'image/png');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('rewrites a link the gateway signed to the origin of the request, keeping key, expiry and signature', async () => {
    const link = await signedLink();
    const links = createFileLinks({ publicUrl: null, verify });
    const text = JSON.stringify({ output: { image_url: link, cost: 0.1 } });
    const out = JSON.parse(links.localize(text, request('localhost:8080'))) as { output: { image_url: string } };
    const rewritten = new URL(out.output.image_url);
    expect(rewritten.origin).toBe('http://localhost:8080');
    expect(rewritten.pathname + rewritten.search).toBe(new URL(link).pathname + new URL(link).search);
    expect(new URL(JSON.parse(links.localize(text, request('gpu-box.lan:9000', true))).output.image_url).origin).toBe('https://gpu-box.lan:9000');
    expect(new URL(JSON.parse(links.localize(text, request('[::1]:8080'))).output.image_url).origin).toBe('http://[::1]:8080');
  });

  it('leaves links it did not sign, answers without a usable Host, and everything under GANTRY_PUBLIC_URL as they are', async () => {
    const link = await signedLink();
    const links = createFileLinks({ publicUrl: null, verify });
    const forged = link.replace(/sig=[^&"]+/, 'sig=AAAA');
    expect(links.localize(JSON.stringify({ url: forged }), request('localhost:8080'))).toBe(JSON.stringify({ url: forged }));
    const text = JSON.stringify({ url: link });
    for (const host of [undefined, 'evil.com/x', 'a b', 'x'.repeat(400), 'host:8080@evil']) expect(links.localize(text, request(host)), String(host)).toBe(text);
    expect(createFileLinks({ publicUrl: 'https://gantry.example.org', verify }).localize(text, request('localhost:8080'))).toBe(text);
    const plain = '{"output":"no links here"}';
    expect(links.localize(plain, request('localhost:8080'))).toBe(plain);
  });

  it('takes the origin only from a well-formed Host', () => {
    expect(requestOrigin(request('localhost:8080'))).toBe('http://localhost:8080');
    expect(requestOrigin(request('10.0.0.5'))).toBe('http://10.0.0.5');
    expect(requestOrigin(request('evil.com/path'))).toBeNull();
    expect(requestOrigin(request(undefined))).toBeNull();
  });
});
