import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Encrypts secrets at rest (a job's s3Config and webhook URL, an endpoint's webhook secret) with AES-256-GCM. The 32-byte key comes from
 * GANTRY_SECRET_KEY (base64) or from `<dataDir>/secret.key`, created on first start (mode 0600).
 * Several gateways on one database must share the key (set GANTRY_SECRET_KEY).
 */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

/** The gateway's 32-byte secret key: GANTRY_SECRET_KEY, else `<dataDir>/secret.key` (created on first start, mode 0600). */
export function loadSecretKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  if (env.GANTRY_SECRET_KEY) {
    const key = Buffer.from(env.GANTRY_SECRET_KEY, 'base64');
    if (key.length !== 32) throw new Error('Invalid GANTRY_SECRET_KEY: expected 32 bytes, base64-encoded');
    return key;
  }
  const file = join(dataDir, 'secret.key');
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`Invalid secret key file ${file}: expected 32 bytes, base64-encoded`);
    return key;
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600 });
  chmodSync(file, 0o600);
  return key;
}

/** What every sealed text starts with; no plain value stored beside sealed ones (a URL, JSON) does. */
const SEALED_PREFIX = 'v1:';

/**
 * `stored` opened when it is sealed, else as it is: a column that came to be sealed later (a
 * job's webhook URL) still holds plain values written before.
 *
 * @example openIfSealed(box, box.seal('https://h/x')) === 'https://h/x'; openIfSealed(box, 'https://h/x') === 'https://h/x'
 */
export function openIfSealed(box: Pick<SecretBox, 'open'>, stored: string): string {
  return stored.startsWith(SEALED_PREFIX) ? box.open(stored) : stored;
}

/** @example const box = createSecretBox(randomBytes(32)); box.open(box.seal('x')) === 'x' */
export function createSecretBox(key: Buffer): SecretBox {
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return `${SEALED_PREFIX}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
    },
    open(sealed) {
      if (!sealed.startsWith(SEALED_PREFIX)) throw new Error('unknown secret format');
      const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}
