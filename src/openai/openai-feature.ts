import type { RouteTable } from '../http/route-table.js';
import { createOpenAiRoutes, type OpenAiRoutes, type OpenAiRouteDeps } from './openai-routes.js';

/** What the OpenAI feature plugs into: the route table, and the services its routes call. */
export interface OpenAiFeatureDeps extends OpenAiRouteDeps {
  routes: RouteTable;
}

/**
 * OpenAI-compatible routes for LLM workers as a feature of the gateway (docs/openai.md):
 * `/v2/{endpointId}/openai/v1/...` on every endpoint, served by the endpoint's own workers.
 * Returns the switch the gateway's shutdown flips when its grace begins.
 *
 * @example const openai = setUpOpenAiFeature({ routes: gateway.routes, ...gateway.http }); openai.shutDown(10_000);
 */
export function setUpOpenAiFeature(deps: OpenAiFeatureDeps): Pick<OpenAiRoutes, 'shutDown'> {
  const { routes, ...routeDeps } = deps;
  const openai = createOpenAiRoutes(routeDeps);
  routes.add(...openai.routes);
  return { shutDown: (graceMs) => openai.shutDown(graceMs) };
}
