// GANTRY_TRUSTED_PROXIES: X-Forwarded-For is believed only from the proxies it names, read from
// its right end past those proxies; anyone else's header is ignored (issue 26.2).
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createClientAddress } from '../../src/http/client-address.js';

const req = (peer: string, xff?: string): IncomingMessage => ({ socket: { remoteAddress: peer }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }) as unknown as IncomingMessage;

describe('createClientAddress', () => {
  const behindProxies = createClientAddress(['127.0.0.1', '10.0.0.0/8', 'fd00::/8']);

  it('is the peer when no proxy is trusted, whatever the header says', () => {
    const none = createClientAddress([]);
    expect(none(req('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    expect(none(req('::ffff:127.0.0.1', '198.51.100.1'))).toBe('127.0.0.1');
  });

  it('reads X-Forwarded-For from a trusted peer, from the right, past the trusted hops', () => {
    expect(behindProxies(req('127.0.0.1', '198.51.100.1'))).toBe('198.51.100.1');
    expect(behindProxies(req('::ffff:10.1.2.3', '6.6.6.6, 198.51.100.1, 10.9.9.9'))).toBe('198.51.100.1'); // the client cannot prepend itself
    expect(behindProxies(req('fd00::5', '2001:db8::7'))).toBe('2001:db8::7');
    expect(behindProxies(req('127.0.0.1', '10.0.0.1, 127.0.0.1'))).toBe('127.0.0.1'); // only proxies: the peer
    expect(behindProxies(req('127.0.0.1'))).toBe('127.0.0.1');
    expect(behindProxies(req('127.0.0.1', 'not-an-ip, 198.51.100.1'))).toBe('198.51.100.1');
    expect(behindProxies(req('127.0.0.1', '198.51.100.1, not-an-ip'))).toBe('127.0.0.1'); // a malformed nearest hop: nothing believed
  });

  it('ignores the header from an untrusted peer', () => {
    expect(behindProxies(req('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
  });
});

describe('GANTRY_TRUSTED_PROXIES', () => {
  it('takes addresses and CIDR blocks, and refuses anything else naming it', () => {
    expect(loadConfig({ GANTRY_TRUSTED_PROXIES: '127.0.0.1, 10.0.0.0/8,fd00::/8' }).trustedProxies).toEqual(['127.0.0.1', '10.0.0.0/8', 'fd00::/8']);
    expect(loadConfig({}).trustedProxies).toEqual([]);
    for (const bad of ['nginx.internal', '10.0.0.0/33', '127.0.0.1/8/1', '::1/129']) {
      expect(() => loadConfig({ GANTRY_TRUSTED_PROXIES: bad }), bad).toThrow(`Invalid GANTRY_TRUSTED_PROXIES: ${JSON.stringify(bad)} is not an IP address or CIDR block`);
    }
  });
});
