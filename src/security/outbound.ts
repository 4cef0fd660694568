import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { invalidParameter } from '../model/errors.js';
import { TtlCache } from '../util/ttl-cache.js';

/**
 * The outbound-call policy (docs/security.md): calls Gantry makes to addresses a client names
 * (webhooks, a job's `s3Config.endpointUrl` in the image workers) may not reach loopback,
 * private, shared (CGNAT), link-local (169.254.169.254, the cloud metadata service),
 * unspecified, multicast or reserved addresses, IPv6 unique-local or IPv4-mapped/-compatible
 * addresses, nor 6to4 (2002::/16) or Teredo (2001::/32) addresses whose embedded IPv4 address
 * is any of those, unless the operator allows them with GANTRY_OUTBOUND_ALLOW (CIDRs, addresses or
 * host names). Names are checked after DNS resolution, every address of the answer, and again
 * when the connection is made (the lookup of the connection itself is guarded), so a name that
 * changes its answer between the check and the call is caught too. No redirect is followed.
 */

const REFUSED_V4 = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.168.0.0/16', '198.18.0.0/15', '224.0.0.0/4', '240.0.0.0/4'];
// ::/96 holds :: and ::1 and the old IPv4-compatible form; ::ffff:0:0/96 the IPv4-mapped one; 64:ff9b::/96 NAT64.
const REFUSED_V6 = ['::/96', '::ffff:0:0/96', '64:ff9b::/96', '100::/64', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8'];

/** What the policy says of the addresses one name resolves to. */
export interface OutboundPolicy {
  /** True when `address` (that `host` resolved to, or `host` itself) may be called. */
  allows(address: string, host: string): boolean;
}

/** Rules by family: one BlockList would match IPv4 addresses against IPv6 rules (as ::ffff:a.b.c.d). */
interface Ranges {
  v4: BlockList;
  v6: BlockList;
}

function ranges(): Ranges {
  return { v4: new BlockList(), v6: new BlockList() };
}

function inRanges(r: Ranges, address: string): boolean {
  const family = isIP(address);
  return family === 4 ? r.v4.check(address, 'ipv4') : family === 6 ? r.v6.check(address, 'ipv6') : false;
}

function addSubnet(list: Ranges, cidr: string, what: string): void {
  const [address = '', prefixText] = cidr.split('/');
  const family = isIP(address);
  const prefix = prefixText === undefined ? (family === 6 ? 128 : 32) : Number(prefixText);
  if (family === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32)) {
    throw new Error(`Invalid ${what}: ${JSON.stringify(cidr)} is not an address or CIDR`);
  }
  if (family === 6) list.v6.addSubnet(address, prefix, 'ipv6');
  else list.v4.addSubnet(address, prefix, 'ipv4');
}

/**
 * The 16 bytes of an IPv6 address (`::` and a trailing dotted quad included), or undefined
 * when `address` is not one.
 *
 * @example ipv6Bytes('2002:a00:1::')?.[2] === 0x0a
 */
export function ipv6Bytes(address: string): Uint8Array | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.replace(/%.*$/, '');
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const words = (part: string): number[] => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const front = words(head);
  const back = tail === undefined ? [] : words(tail);
  const all = [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
  const bytes = new Uint8Array(16);
  all.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 0xff;
  });
  return bytes;
}

/**
 * The IPv4 addresses an IPv6 address carries and that packets to it reach: the one of a 6to4
 * address (2002:AABB:CCDD::/48 → A.B.C.D), the server and the client of a Teredo address
 * (2001:0000:SSSS:SSSS:…:CCCC:CCCC, the client's bits inverted). None for other addresses.
 *
 * @example embeddedIpv4('2002:7f00:1::1') // ['127.0.0.1']
 */
export function embeddedIpv4(address: string): string[] {
  const b = ipv6Bytes(address);
  if (!b) return [];
  const v4 = (at: number, mask = 0): string => [0, 1, 2, 3].map((i) => (b[at + i]! ^ mask) & 0xff).join('.');
  if (b[0] === 0x20 && b[1] === 0x02) return [v4(2)];
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0) return [v4(4), v4(12, 0xff)];
  return [];
}

/** `::ffff:a.b.c.d` as `a.b.c.d`, for the allow list; anything else unchanged. */
function unmapped(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m?.[1] ?? address;
}

/**
 * The policy of GANTRY_OUTBOUND_ALLOW's entries: CIDRs (`10.0.0.0/8`, `fd00::/8`), single
 * addresses (`127.0.0.1`) and host names (`minio.internal`, or `*.internal` for its subdomains).
 * Throws naming the variable on an entry that is none of these.
 *
 * @example createOutboundPolicy(['127.0.0.1', 'minio.internal']).allows('127.0.0.1', 'localhost') // true
 */
export function createOutboundPolicy(allow: readonly string[]): OutboundPolicy {
  const refused = ranges();
  for (const cidr of REFUSED_V4) addSubnet(refused, cidr, 'refused range');
  for (const cidr of REFUSED_V6) addSubnet(refused, cidr, 'refused range');
  const allowed = ranges();
  const hosts = new Set<string>();
  const suffixes: string[] = [];
  for (const raw of allow.map((e) => e.trim()).filter((e) => e !== '')) {
    const entry = raw.replace(/^\[(.*)\]$/, '$1');
    if (isIP(entry.split('/')[0] ?? '') !== 0) addSubnet(allowed, entry, 'GANTRY_OUTBOUND_ALLOW');
    else if (/^(\*\.)?[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i.test(entry)) {
      if (entry.startsWith('*.')) suffixes.push(entry.slice(1).toLowerCase());
      else hosts.add(entry.toLowerCase());
    } else throw new Error(`Invalid GANTRY_OUTBOUND_ALLOW: ${JSON.stringify(raw)} is not a CIDR, an address or a host name`);
  }
  return {
    allows(address, host) {
      const name = host.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
      if (hosts.has(name) || suffixes.some((s) => name.endsWith(s))) return true;
      const plain = unmapped(address);
      if (inRanges(allowed, plain)) return true;
      if (isIP(address) === 0 || inRanges(refused, address)) return false;
      // A 6to4 or Teredo address is reached through the IPv4 address inside it: that one is checked too.
      return embeddedIpv4(address).every((v4) => inRanges(allowed, v4) || !inRanges(refused, v4));
    },
  };
}

/** Why a call is refused; never the address a name resolved to. */
const REFUSAL = 'is refused by the outbound policy: loopback, private, link-local and metadata addresses are not called unless the operator allows them (GANTRY_OUTBOUND_ALLOW)';

/** An outbound call the policy refused (its message says so, never which address). */
export class OutboundRefusedError extends Error {
  readonly code = 'EOUTBOUND';
  constructor(host: string) {
    super(`${host} ${REFUSAL}`);
    this.name = 'OutboundRefusedError';
  }
}

function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));
}

/** Verdicts of recent submit-time checks, per policy and URL host: a burst of jobs with one webhook resolves it once. */
const verdictsOf = new WeakMap<OutboundPolicy, TtlCache<string, Verdict>>();

/** A submit-time check's answer: allowed, refused by the policy, or a name that does not resolve. */
type Verdict = 'allowed' | 'refused' | 'unresolved';

/** Why a name that does not resolve is refused (not the policy: a typo or a name only another network knows). */
const UNRESOLVED = 'names a host that does not resolve from the gateway (a webhook is called by the gateway, so its host must resolve here)';

function verdictCache(policy: OutboundPolicy): TtlCache<string, Verdict> {
  let cache = verdictsOf.get(policy);
  if (!cache) verdictsOf.set(policy, (cache = new TtlCache<string, Verdict>({ ttlMs: 30_000, maxEntries: 10_000, maxBytes: 2_000_000 })));
  return cache;
}

/**
 * Checks a URL a client gave (`field` names it in the 400): its host, or every address its
 * name resolves to, must be allowed. A name that does not resolve is refused too, saying so.
 *
 * @example await checkOutboundUrl(policy, body.webhook, 'webhook'); // throws 400 naming webhook
 */
export async function checkOutboundUrl(policy: OutboundPolicy, url: string, field: string, now = Date.now()): Promise<void> {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  const verdicts = verdictCache(policy);
  const cached = verdicts.get(host, now);
  let verdict = cached?.value;
  if (verdict === undefined) {
    verdict = isIP(host) !== 0 ? (policy.allows(host, host) ? 'allowed' : 'refused') : await resolvedVerdict(policy, host);
    verdicts.set(host, verdict, now);
  }
  if (verdict === 'refused') throw invalidParameter(field, REFUSAL);
  if (verdict === 'unresolved') throw invalidParameter(field, UNRESOLVED);
}

async function resolvedVerdict(policy: OutboundPolicy, host: string): Promise<Verdict> {
  if (policy.allows('', host)) return 'allowed';
  let addresses: LookupAddress[];
  try {
    addresses = await resolveAll(host);
  } catch {
    return 'unresolved';
  }
  if (addresses.length === 0) return 'unresolved';
  return addresses.every((a) => policy.allows(a.address, host)) ? 'allowed' : 'refused';
}

/**
 * A `lookup` for node:net connections that refuses a name any of whose addresses the policy
 * refuses: the check made at the moment of connecting, so a changed DNS answer cannot slip by.
 */
export function guardedLookup(policy: OutboundPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { family: options.family ?? 0, hints: options.hints ?? 0, all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      if (addresses.length === 0 || !addresses.every((a) => policy.allows(a.address, hostname))) return callback(new OutboundRefusedError(hostname), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

/** How the outbound fetch keeps connections: a keep-alive agent per scheme, `maxSockets` per host. */
export interface OutboundFetchOptions {
  maxSockets?: number;
}

/**
 * A `fetch` for calls to client-named URLs, over node:http(s) with keep-alive agents (connections
 * are reused) and the guarded lookup. The answer carries only the status (the body is
 * discarded unread: nothing of a remote answer can reach a job or a log); redirects are not
 * followed. Literal addresses in the URL are checked before connecting.
 *
 * @example const post = createOutboundFetch(policy); (await post(url, { method: 'POST', body })).status
 */
export function createOutboundFetch(policy: OutboundPolicy, options: OutboundFetchOptions = {}): typeof fetch {
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 32, lookup: guardedLookup(policy) };
  const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };
  const outbound = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`unsupported protocol ${url.protocol}`);
    if (isIP(host) !== 0 && !policy.allows(host, host)) throw new OutboundRefusedError(host);
    return send(url, init, url.protocol === 'https:' ? agents.https : agents.http);
  };
  return outbound as typeof fetch;
}

function send(url: URL, init: RequestInit, agent: http.Agent): Promise<Response> {
  const headers = Object.fromEntries(new Headers(init.headers).entries());
  const body = init.body === undefined || init.body === null ? undefined : typeof init.body === 'string' ? init.body : Buffer.from(init.body as ArrayBuffer);
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(
      url,
      { method: init.method ?? 'GET', headers, agent, ...(init.signal ? { signal: init.signal } : {}) },
      (res) => {
        // Drained unread (so the connection can be reused) within the caller's deadline.
        res.on('error', () => undefined).resume();
        const status = res.statusCode ?? 502;
        resolve(new Response(null, { status: status >= 200 && status <= 599 ? status : 502 }));
      },
    );
    request.once('error', reject);
    request.end(body);
  });
}
