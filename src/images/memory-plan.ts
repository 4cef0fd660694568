import type { TextEncoderPlacement } from '../config/image-config.js';

/**
 * The start-up memory check of an image worker (docs/models.md, "Memory and devices"): what the
 * graphs need where they are placed, against what the device has, said in words before
 * onnxruntime runs out of memory half-way through loading.
 *
 * The estimate is the graphs' weight bytes (file sizes, external data included) plus a working
 * share for activations: onnxruntime allocates intermediate tensors of the denoiser and the VAE
 * on top of the weights. 25% of the resident weights, at least 1 GiB on a GPU, is what FLUX and
 * SD exports at 1024² need in our reading of their activation sizes; it is an estimate. The
 * budget is the device's free memory, or a memory limit setting when smaller
 * (GANTRY_IMAGE_<KIND>_MEMORY_LIMIT_MB, else GANTRY_IMAGE_MEMORY_LIMIT_MB): two workers sharing a
 * device are kept apart only by limits that split it.
 */

/** One graph of a pipeline and its weight bytes. */
export interface GraphSize {
  name: string;
  bytes: number;
  /** Text encoders follow the placement setting; the denoiser and the VAE always stay on the device. */
  encoder: boolean;
}

/** What the check compares: the graphs, their placement, and the memory of the device and of the host. */
export interface MemoryPlanInput {
  graphs: GraphSize[];
  textEncoders: TextEncoderPlacement;
  /** 'cpu' or 'cuda:N', for the message. */
  deviceName: string;
  onGpu: boolean;
  /** Bytes the worker may use on its device (free memory, or the configured limit when smaller). */
  deviceBudget: number;
  /** Bytes free in host memory (for encoders placed on the CPU). */
  hostBudget: number;
  /** Where the budget comes from, e.g. 'free on cuda:0 (80.0 GiB total)'. */
  budgetSource: string;
}

/** The verdict: the peak bytes on the device and on the host, and the reason when it does not fit. */
export interface MemoryPlan {
  fits: boolean;
  devicePeak: number;
  hostPeak: number;
  /** Empty when it fits; else what does not fit and what to change, in words. */
  problem: string;
}

const GIB = 1024 ** 3;
/** GiB, or MiB below 0.01 GiB (a tight limit or a tiny model would read "0.00 GiB"). */
const gib = (bytes: number): string => (bytes < GIB / 100 ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : `${(bytes / GIB).toFixed(bytes < GIB ? 2 : 1)} GiB`);

function workingShare(weights: number, onGpu: boolean): number {
  return Math.max(weights * 0.25, onGpu ? GIB : 0);
}

/**
 * Checks that the pipeline fits where it is placed. Resident graphs count in full; offloaded
 * encoders are loaded one at a time per request, so only the largest adds to the peak.
 *
 * @example planMemory({ graphs, textEncoders: 'offload', deviceName: 'cuda:0', onGpu: true, deviceBudget, hostBudget, budgetSource }).fits
 */
export function planMemory(input: MemoryPlanInput): MemoryPlan {
  const encoders = input.graphs.filter((g) => g.encoder);
  const resident = input.graphs.filter((g) => !g.encoder);
  const onDevice = input.textEncoders === 'device' || !input.onGpu ? [...resident, ...encoders] : resident;
  const largestEncoder = encoders.reduce((max, g) => Math.max(max, g.bytes), 0);
  const deviceWeights = onDevice.reduce((sum, g) => sum + g.bytes, 0) + (input.textEncoders === 'offload' && input.onGpu ? largestEncoder : 0);
  const devicePeak = deviceWeights + workingShare(deviceWeights, input.onGpu);
  const hostWeights = input.textEncoders === 'cpu' && input.onGpu ? encoders.reduce((sum, g) => sum + g.bytes, 0) : 0;
  const hostPeak = hostWeights + workingShare(hostWeights, false);
  const problems: string[] = [];
  if (devicePeak > input.deviceBudget) {
    const parts = onDevice.map((g) => `${g.name} ${gib(g.bytes)}`);
    if (input.textEncoders === 'offload' && input.onGpu && largestEncoder > 0) parts.push(`the largest text encoder while it runs ${gib(largestEncoder)}`);
    const encoderBytes = encoders.reduce((sum, g) => sum + g.bytes, 0);
    const hint = input.onGpu && input.textEncoders === 'device' && encoderBytes > 0
      ? ` GANTRY_IMAGE_TEXT_ENCODERS=cpu would keep ${gib(encoderBytes)} of text encoders off the device (offload: load them per request).`
      : '';
    problems.push(
      `the image model does not fit on ${input.deviceName}: ${parts.join(' + ')} + working memory ${gib(devicePeak - deviceWeights)} = ${gib(devicePeak)}, ` +
        `but ${gib(input.deviceBudget)} is available (${input.budgetSource}).${hint} Or use a smaller export (float16, int8), or another device.`,
    );
  }
  if (hostPeak > input.hostBudget) {
    problems.push(`the text encoders placed on the CPU need ${gib(hostPeak)} of host memory but ${gib(input.hostBudget)} is free; use GANTRY_IMAGE_TEXT_ENCODERS=offload or device.`);
  }
  return { fits: problems.length === 0, devicePeak, hostPeak, problem: problems.join(' Also, ') };
}
