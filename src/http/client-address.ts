import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';

/**
 * The address of the client behind a request: the peer of the connection, unless that peer is
 * one of the proxies GANTRY_TRUSTED_PROXIES names; then X-Forwarded-For is read from its right
 * end (the address the nearest proxy saw), skipping the trusted proxies, and the first address
 * that is not one of them is the client. A header from anyone else is ignored: a client cannot
 * name itself someone else to the console's sign-in limit or the logs.
 */
export type ClientAddress = (req: IncomingMessage) => string;

/** `::ffff:10.0.0.1` → `10.0.0.1`: the IPv4 peers of a dual-stack socket. */
function plain(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * @example const clientOf = createClientAddress(['127.0.0.1']); clientOf(req) // '203.0.113.7' from nginx's X-Forwarded-For
 */
export function createClientAddress(trustedProxies: readonly string[]): ClientAddress {
  const trusted = new BlockList();
  for (const entry of trustedProxies) {
    const [address = '', bits] = entry.split('/');
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) trusted.addAddress(address, family);
    else trusted.addSubnet(address, Number(bits), family);
  }
  const isTrusted = (address: string): boolean => {
    const family = isIP(address);
    return family !== 0 && trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
  return (req) => {
    const peer = plain(req.socket.remoteAddress ?? '');
    if (trustedProxies.length === 0 || !isTrusted(peer)) return peer || 'unknown';
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').map((h) => plain(h.trim()));
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i] ?? '';
      if (isIP(hop) === 0) return peer; // a malformed hop: nothing left of it can be believed
      if (!isTrusted(hop)) return hop;
    }
    return peer;
  };
}
