// The `flashboot` endpoint setting (docs/api.md, docs/scaling.md "Warm pool"): false unless set,
// true or false only, refused otherwise with 400 naming the field; kept across other updates.
import { describe, expect, it } from 'vitest';
import { parseEndpointSettings, renderEndpoint } from '../../src/jobs/endpoint-settings.js';
import { AppError } from '../../src/model/errors.js';

const seal = (plain: string): string => `sealed:${plain}`;
const NOW = 1_800_000_000_000;

describe('flashboot setting', () => {
  it('defaults to false, takes true, and keeps it when other settings change', () => {
    expect(parseEndpointSettings({ id: 'a' }, undefined, NOW, seal).flashboot).toBe(false);
    const on = parseEndpointSettings({ id: 'a', flashboot: true, worker: { image: 'acme/sd:1', gpus: 1 } }, undefined, NOW, seal);
    expect(on.flashboot).toBe(true);
    expect(renderEndpoint(on)).toMatchObject({ flashboot: true });
    expect(parseEndpointSettings({ idleTimeout: 30 }, on, NOW + 1, seal).flashboot).toBe(true);
    expect(parseEndpointSettings({ flashboot: false }, on, NOW + 1, seal).flashboot).toBe(false);
  });

  it('refuses anything but true or false, naming the field', () => {
    for (const bad of ['yes', 1, null, {}]) {
      let caught: unknown;
      try {
        parseEndpointSettings({ id: 'a', flashboot: bad }, undefined, NOW, seal);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(AppError);
      expect(caught).toMatchObject({ status: 400, code: 'INVALID_PARAMETER' });
      expect((caught as Error).message).toMatch(/flashboot/);
    }
  });
});
