import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendJson } from '../../src/http/respond.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

/** The seams features plug routes into (docs/architecture.md): a path segment and an endpoint operation. */
describe('route table', () => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry();
    const routes = t.gantry.gateway.routes;
    routes.add('hello', async (_req, res, target) => sendJson(res, 200, { segments: target.segments, q: target.query.get('q') }));
    routes.addEndpointOperation('echo-op', async (_req, res, target) => sendJson(res, 200, { endpointId: target.endpointId, rest: target.rest }));
  });
  afterAll(async () => {
    await t?.close();
  });

  it('serves a feature segment and an endpoint operation', async () => {
    expect(await (await fetch(`${t.url}/hello/a/b?q=1`)).json()).toEqual({ segments: ['a', 'b'], q: '1' });
    expect(await (await fetch(`${t.url}/v2/ep1/echo-op/x/y/z`)).json()).toEqual({ endpointId: 'ep1', rest: ['x', 'y', 'z'] });
  });

  it('refuses to replace a core route or a taken one', () => {
    const routes = t.gantry.gateway.routes;
    for (const segment of ['v2', 'admin', 'healthz', 'hello', 'files']) expect(() => routes.add(segment, async () => {})).toThrow(/taken/);
    for (const op of ['run', 'status', 'job-take', 'ping', 'echo-op']) expect(() => routes.addEndpointOperation(op, async () => {})).toThrow(/taken/);
  });

  it('leaves unknown paths a JSON 404', async () => {
    const res = await fetch(`${t.url}/nothing-here`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 'NOT_FOUND' });
  });
});
