import type { DockerHostConfig } from '../../config/docker-config.js';
import type { ContainerStartSpec } from '../driver.js';
import { runpodWorkerEnv } from '../worker-env.js';

/**
 * The labels of a Gantry container. `io.gantry.instance` ties it to one installation (all
 * gateways sharing a store): only containers with this gateway's value are ever stopped as
 * leftovers, so a container Gantry did not start — or another installation's — is never touched.
 */
export const LABELS = {
  instance: 'io.gantry.instance',
  endpoint: 'io.gantry.endpoint',
  worker: 'io.gantry.worker',
  gateway: 'io.gantry.gateway',
} as const;

const MIB = 1024 * 1024;
/** The engine keeps this much of a container's output on disk (json-file, 2 files of 10 MB); the gateway keeps its own ring. */
const LOG_OPTS = { 'max-size': '10m', 'max-file': '2' };

/** What the create call is made of besides the endpoint's settings. */
export interface ContainerContext {
  host: DockerHostConfig;
  /** The host's GPUs this container gets (ids chosen by placement). */
  deviceIds: string[];
  /** The gateway's URL as seen from a container on this host. */
  gatewayUrl: string;
  /** Add `host.docker.internal` → the host (a local engine on a bridge network). */
  hostGatewayAlias: boolean;
  /** The installation label value and a description of this gateway process. */
  instance: string;
  gateway: string;
}

/** The container's command: a string runs in the image's shell (like a Dockerfile's shell form), an array as is; none keeps the image's CMD. */
function commandOf(command: ContainerStartSpec['command']): string[] | undefined {
  if (command === undefined) return undefined;
  return typeof command === 'string' ? ['/bin/sh', '-c', command] : command;
}

/**
 * The body of `POST /containers/create` for one worker: the image and its command, the
 * endpoint's env and the RUNPOD_* variables pointing at the gateway as the container reaches
 * it, labels, memory limit, GPU device request (`--gpus "device=…"`: the ids placement chose,
 * so two containers never share a GPU), volumes, network, an init process (so SIGTERM reaches
 * the worker and zombies are reaped), bounded logs, and no restart policy (the pool restarts).
 *
 * @example containerCreateBody({ image: 'acme/sd:1', env: {}, runpod, workerId: 'sd-1a2b3c4d', endpointId: 'sd', gpus: 1 }, { host, deviceIds: ['0'], gatewayUrl: 'http://host.docker.internal:8080', hostGatewayAlias: true, instance: 'a1b2', gateway: 'gw1' })
 */
export function containerCreateBody(spec: ContainerStartSpec, ctx: ContainerContext): Record<string, unknown> {
  const runpod = runpodWorkerEnv({ ...spec.runpod, gatewayUrl: ctx.gatewayUrl });
  const env = Object.entries({ ...spec.env, ...runpod }).map(([k, v]) => `${k}=${v}`);
  const hostConfig: Record<string, unknown> = {
    Init: true,
    NetworkMode: ctx.host.network,
    RestartPolicy: { Name: 'no' },
    AutoRemove: false,
    LogConfig: { Type: 'json-file', Config: LOG_OPTS },
    SecurityOpt: ['no-new-privileges'],
  };
  if (ctx.hostGatewayAlias) hostConfig.ExtraHosts = ['host.docker.internal:host-gateway'];
  if (spec.memoryMb !== undefined) {
    hostConfig.Memory = spec.memoryMb * MIB;
    hostConfig.MemorySwap = spec.memoryMb * MIB;
  }
  if (ctx.deviceIds.length > 0) hostConfig.DeviceRequests = [{ Driver: 'nvidia', DeviceIDs: ctx.deviceIds, Capabilities: [['gpu']] }];
  if (spec.volumes && spec.volumes.length > 0) hostConfig.Binds = spec.volumes;
  const cmd = commandOf(spec.command);
  return {
    Image: spec.image,
    ...(cmd ? { Cmd: cmd } : {}),
    Env: env,
    Labels: {
      [LABELS.instance]: ctx.instance,
      [LABELS.endpoint]: spec.endpointId,
      [LABELS.worker]: spec.workerId,
      [LABELS.gateway]: ctx.gateway,
    },
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: hostConfig,
  };
}
