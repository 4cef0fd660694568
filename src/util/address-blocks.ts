import { isIP } from 'node:net';

/**
 * Whether `entry` is an address or CIDR block GANTRY_TRUSTED_PROXIES accepts.
 *
 * @example isAddressOrBlock('10.0.0.0/8') // true
 */
export function isAddressOrBlock(entry: string): boolean {
  const [address = '', bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d{1,3}$/.test(bits) && n <= (family === 4 ? 32 : 128);
}
