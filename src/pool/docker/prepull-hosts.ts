import type { DockerHostConfig } from '../../config/docker-config.js';
import type { PrepullSpec } from '../driver.js';

/**
 * Whether a host could ever run a worker asking for `spec`'s GPUs, free or not (the hosts an
 * image is prepulled to): exact device ids it has; a count of devices of one acceptable model
 * (any model without `gpuTypes`); any host for a worker without GPUs.
 *
 * @example couldRun({ gpus: ['0', '1'], gpuTypes: ['L4', 'L4'] }, { image: 'x', gpus: 2, gpuTypes: ['A100'] }) // false
 */
export function couldRun(host: Pick<DockerHostConfig, 'gpus' | 'gpuTypes'>, spec: PrepullSpec): boolean {
  const { gpus } = spec;
  if (gpus === undefined || gpus === 0) return true;
  if (Array.isArray(gpus)) return gpus.every((id) => host.gpus.includes(id));
  const byType = new Map<string, number>();
  for (const [i] of host.gpus.entries()) {
    const type = host.gpuTypes[i] ?? '';
    byType.set(type, (byType.get(type) ?? 0) + 1);
  }
  const types = spec.gpuTypes && spec.gpuTypes.length > 0 ? spec.gpuTypes : [...byType.keys()];
  return types.some((type) => (byType.get(type) ?? 0) >= gpus);
}
