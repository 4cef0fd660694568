/**
 * Images in an S3-compatible bucket (s3rver, started here). s3rver accepts any SigV4 signature,
 * so the signer itself is checked against AWS's published examples.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS, type S3Settings } from '../../src/config/image-config.js';
import { presignGet, presignUrl, putObject, signHeaders } from '../../src/images/s3.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverCtor = new (options: Record<string, unknown>) => S3rverInstance;
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverCtor;

let dir: string;
let s3rver: S3rverInstance;
let endpoint: string;
let t: TestGantry;
let key: string;

const creds = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', region: 'us-east-1' };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-s3-'));
  s3rver = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: 'global-images' }, { name: 'job-images' }] });
  const { port } = await s3rver.run();
  endpoint = `http://127.0.0.1:${port}`;
  const s3: S3Settings = { endpoint, bucket: 'global-images', ...creds };
  t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: true, s3, urlTtlSeconds: 3600 }, outboundAllow: ['127.0.0.1'] });
  key = await t.createKey(['run', 'read']);
});

afterAll(async () => {
  await t?.close();
  await s3rver?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function runsync(endpointId: string, body: Record<string, unknown>) {
  const res = await fetch(`${t.url}/v2/${endpointId}/runsync`, { method: 'POST', headers: { authorization: key, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as { id: string; status: string; error?: string; output?: { image_url: string; width: number; height: number; format: string } };
}

describe('S3-compatible image store', () => {
  it('signs requests exactly as AWS documents SigV4 (the published examples)', () => {
    // docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html and sigv4-query-string-auth.html
    const aws = { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', region: 'us-east-1' };
    const url = new URL('https://examplebucket.s3.amazonaws.com/test.txt');
    const presigned = new URL(presignUrl(aws, url, 86400, new Date('2013-05-24T00:00:00Z')));
    expect(presigned.searchParams.get('X-Amz-Signature')).toBe('aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404');
    const empty = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
    const auth = signHeaders(aws, 'GET', url, { Range: 'bytes=0-9', 'x-amz-content-sha256': empty, 'x-amz-date': '20130524T000000Z' }, empty);
    expect(auth).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,' +
        'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
    );
  });

  it('round-trips an object through the S3 server: signed PUT, presigned GET', async () => {
    const s3: S3Settings = { endpoint, bucket: 'job-images', ...creds };
    await putObject(s3, 'dir/hello.txt', new TextEncoder().encode('hello'), 'text/plain');
    const res = await fetch(presignGet(s3, 'dir/hello.txt', 60));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('hello');
    await expect(putObject({ ...s3, bucket: 'no-such-bucket' }, 'x.txt', new Uint8Array(1), 'text/plain')).rejects.toThrow(/HTTP 404/);
  });

  it('puts images in the global bucket, image_url a presigned URL', async () => {
    const job = await runsync('image-fast', { input: { prompt: 'harbour', width: 320, height: 256, num_inference_steps: 1 } });
    expect(job.status, job.error).toBe('COMPLETED');
    const url = new URL(job.output!.image_url);
    expect(url.origin).toBe(endpoint);
    expect(url.pathname).toBe(`/global-images/image-fast/${job.id}.jpeg`);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('3600');
    const bytes = Buffer.from(await (await fetch(url)).arrayBuffer());
    expect(await sharp(bytes).metadata()).toMatchObject({ format: 'jpeg', width: 320, height: 256 });
  });

  it("puts the image in the job's s3Config bucket instead, when given", async () => {
    const job = await runsync('image-quality', {
      input: { prompt: 'harbour', width: 256, height: 384, num_inference_steps: 1, image_format: 'png' },
      s3Config: { accessId: 'S3RVER', accessSecret: 'S3RVER', bucketName: 'job-images', endpointUrl: endpoint },
    });
    expect(job.status, job.error).toBe('COMPLETED');
    const url = new URL(job.output!.image_url);
    expect(url.pathname).toBe(`/job-images/image-quality/${job.id}.png`);
    const bytes = Buffer.from(await (await fetch(url)).arrayBuffer());
    expect(await sharp(bytes).metadata()).toMatchObject({ format: 'png', width: 256, height: 384 });
    // The credentials never show in the job object.
    const status = await fetch(`${t.url}/v2/image-quality/status/${job.id}`, { headers: { authorization: key } });
    expect(await status.text()).not.toContain('accessSecret');
  });
});
