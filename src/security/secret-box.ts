import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Encrypts secrets at rest (a job's s3Config) with AES-256-GCM. The 32-byte key comes from
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

/** @example const box = createSecretBox(randomBytes(32)); box.open(box.seal('x')) === 'x' */
export function createSecretBox(key: Buffer): SecretBox {
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
    },
    open(sealed) {
      if (!sealed.startsWith('v1:')) throw new Error('unknown secret format');
      const raw = Buffer.from(sealed.slice(3), 'base64');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}
