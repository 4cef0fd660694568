// The typed catalogue of error codes (src/model/errors.ts) is the one list of what the API may
// answer: docs/api.md's table says the same, code for code, status for status.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AppError, ERROR_CODES } from '../../src/model/errors.js';

describe('error codes', () => {
  it('docs/api.md lists every code of the catalogue with its status and when it is given, and no other', () => {
    const api = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const rows = [...api.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \| (.*) \|$/gm)].map((m) => [m[1], Number(m[2]), m[3]]);
    expect(rows).toEqual(Object.entries(ERROR_CODES).map(([code, { status, when }]) => [code, status, when]));
  });

  it('an AppError takes its status from the catalogue; only WORKER_ERROR carries a status of its own', () => {
    expect(new AppError('QUEUE_FULL', 'full').status).toBe(429);
    expect(new AppError('WORKER_ERROR', 'no such model', undefined, undefined, 404).status).toBe(404);
  });
});
