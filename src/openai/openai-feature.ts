import type { RouteTable } from '../http/server.js';
import { createOpenAiRoute, type OpenAiRouteDeps } from './openai-routes.js';

/** What the OpenAI feature plugs into: the route table, and the services its routes call. */
export interface OpenAiFeatureDeps extends OpenAiRouteDeps {
  routes: RouteTable;
}

/**
 * OpenAI-compatible routes for LLM workers as a feature of the gateway (docs/openai.md):
 * `/v2/{endpointId}/openai/v1/...` on every endpoint, served by the endpoint's own workers.
 *
 * @example setUpOpenAiFeature({ routes: gateway.routes, ...gateway.http });
 */
export function setUpOpenAiFeature(deps: OpenAiFeatureDeps): void {
  const { routes, ...routeDeps } = deps;
  routes.addEndpointOperation('openai', createOpenAiRoute(routeDeps));
}
