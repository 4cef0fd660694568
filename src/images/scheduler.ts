/**
 * Denoising schedulers, read from a diffusers `scheduler/scheduler_config.json`:
 * - Euler discrete (EulerDiscreteScheduler: the UNet family, SD 1.x / 2.x / SD-Turbo), in
 *   sigma space with epsilon or v prediction;
 * - flow-matching Euler (FlowMatchEulerDiscreteScheduler: FLUX), sigmas from 1 to 0 with a
 *   static or resolution-dependent shift.
 * Both expose the same plan: the model's timestep and input scale per step, and an Euler step.
 */

export interface SchedulerConfig {
  _class_name?: string;
  num_train_timesteps?: number;
  beta_start?: number;
  beta_end?: number;
  beta_schedule?: string;
  prediction_type?: string;
  timestep_spacing?: string;
  steps_offset?: number;
  shift?: number;
  use_dynamic_shifting?: boolean;
  base_shift?: number;
  max_shift?: number;
  base_image_seq_len?: number;
  max_image_seq_len?: number;
}

export interface Scheduler {
  readonly kind: 'euler' | 'flow';
  /** The timestep fed to the denoiser at each step (length = steps). */
  readonly timesteps: number[];
  /** sigma at each step boundary (length = steps + 1, last is 0). */
  readonly sigmas: number[];
  /** Multiplies the initial unit noise. */
  readonly initNoiseSigma: number;
  /** Factor applied to the latents before the denoiser sees them at step i. */
  inputScale(i: number): number;
  /** Advances `latents` in place by one step, given the model output (after guidance). */
  step(i: number, latents: Float32Array, modelOutput: Float32Array): void;
}

/** Scheduler classes of the UNet family that are read as Euler discrete (same beta schedule). */
const EULER_COMPATIBLE = new Set([
  'EulerDiscreteScheduler',
  'EulerAncestralDiscreteScheduler',
  'PNDMScheduler',
  'DDIMScheduler',
  'LMSDiscreteScheduler',
  'DPMSolverMultistepScheduler',
  'DDPMScheduler',
]);

/**
 * The scheduler a folder's config asks for. Flow matching for FlowMatchEulerDiscreteScheduler;
 * Euler discrete for EulerDiscreteScheduler and the other sigma-schedule classes diffusers
 * lets one swap in (PNDM, DDIM, LMS ... share the beta schedule). Anything else is refused.
 *
 * @example createScheduler({ _class_name: 'EulerDiscreteScheduler' }, 4).timesteps.length === 4
 */
export function createScheduler(config: SchedulerConfig, steps: number, imageSeqLen = 4096): Scheduler {
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`steps must be a positive integer, got ${steps}`);
  const name = config._class_name ?? 'EulerDiscreteScheduler';
  if (name === 'FlowMatchEulerDiscreteScheduler') return flowMatchEuler(config, steps, imageSeqLen);
  if (EULER_COMPATIBLE.has(name)) return eulerDiscrete(config, steps);
  throw new Error(`unsupported scheduler ${name}: expected EulerDiscreteScheduler or FlowMatchEulerDiscreteScheduler`);
}

function linspace(start: number, end: number, n: number): number[] {
  if (n === 1) return [start];
  return Array.from({ length: n }, (_, i) => start + ((end - start) * i) / (n - 1));
}

/** Linear interpolation of y(x) at fractional index t (x = 0..n-1). */
function interpolate(values: number[], t: number): number {
  const lo = Math.max(0, Math.min(values.length - 1, Math.floor(t)));
  const hi = Math.min(values.length - 1, lo + 1);
  const frac = t - lo;
  return values[lo]! * (1 - frac) + values[hi]! * frac;
}

function eulerDiscrete(config: SchedulerConfig, steps: number): Scheduler {
  const trainSteps = config.num_train_timesteps ?? 1000;
  const betaStart = config.beta_start ?? 0.00085;
  const betaEnd = config.beta_end ?? 0.012;
  const schedule = config.beta_schedule ?? 'scaled_linear';
  let betas: number[];
  if (schedule === 'scaled_linear') betas = linspace(Math.sqrt(betaStart), Math.sqrt(betaEnd), trainSteps).map((b) => b * b);
  else if (schedule === 'linear') betas = linspace(betaStart, betaEnd, trainSteps);
  else throw new Error(`unsupported beta_schedule ${schedule}: expected scaled_linear or linear`);
  const prediction = config.prediction_type ?? 'epsilon';
  if (prediction !== 'epsilon' && prediction !== 'v_prediction') {
    throw new Error(`unsupported prediction_type ${prediction}: expected epsilon or v_prediction`);
  }
  let cumulative = 1;
  const trainSigmas = betas.map((beta) => {
    cumulative *= 1 - beta;
    return Math.sqrt((1 - cumulative) / cumulative);
  });

  const spacing = config.timestep_spacing ?? 'linspace';
  let timesteps: number[];
  if (spacing === 'linspace') {
    timesteps = linspace(0, trainSteps - 1, steps).reverse();
  } else if (spacing === 'leading') {
    const ratio = Math.floor(trainSteps / steps);
    timesteps = Array.from({ length: steps }, (_, i) => Math.round(i * ratio) + (config.steps_offset ?? 0)).reverse();
  } else if (spacing === 'trailing') {
    const ratio = trainSteps / steps;
    timesteps = Array.from({ length: steps }, (_, i) => Math.round(trainSteps - i * ratio) - 1);
  } else {
    throw new Error(`unsupported timestep_spacing ${spacing}: expected linspace, leading or trailing`);
  }
  const sigmas = [...timesteps.map((t) => interpolate(trainSigmas, t)), 0];
  const maxSigma = Math.max(...sigmas);
  const initNoiseSigma = spacing === 'linspace' || spacing === 'trailing' ? maxSigma : Math.sqrt(maxSigma * maxSigma + 1);

  return {
    kind: 'euler',
    timesteps,
    sigmas,
    initNoiseSigma,
    inputScale: (i) => 1 / Math.sqrt(sigmas[i]! ** 2 + 1),
    step(i, latents, output) {
      const sigma = sigmas[i]!;
      const dt = sigmas[i + 1]! - sigma;
      const vScale = -sigma / Math.sqrt(sigma * sigma + 1);
      const xScale = 1 / (sigma * sigma + 1);
      for (let k = 0; k < latents.length; k++) {
        const x = latents[k]!;
        // Predicted clean sample, then the ODE derivative (x - x0) / sigma.
        const x0 = prediction === 'epsilon' ? x - sigma * output[k]! : output[k]! * vScale + x * xScale;
        latents[k] = x + ((x - x0) / sigma) * dt;
      }
    },
  };
}

function flowMatchEuler(config: SchedulerConfig, steps: number, imageSeqLen: number): Scheduler {
  // FluxPipeline: sigmas = linspace(1, 1/steps, steps), then shifted.
  const base = linspace(1, 1 / steps, steps);
  let sigmas: number[];
  if (config.use_dynamic_shifting) {
    const baseLen = config.base_image_seq_len ?? 256;
    const maxLen = config.max_image_seq_len ?? 4096;
    const baseShift = config.base_shift ?? 0.5;
    const maxShift = config.max_shift ?? 1.15;
    const m = (maxShift - baseShift) / (maxLen - baseLen);
    const mu = imageSeqLen * m + (baseShift - m * baseLen);
    sigmas = base.map((s) => Math.exp(mu) / (Math.exp(mu) + (1 / s - 1)));
  } else {
    const shift = config.shift ?? 1;
    sigmas = base.map((s) => (shift * s) / (1 + (shift - 1) * s));
  }
  const trainSteps = config.num_train_timesteps ?? 1000;
  const all = [...sigmas, 0];
  return {
    kind: 'flow',
    // The transformer takes sigma itself (diffusers passes timestep / 1000).
    timesteps: sigmas.map((s) => (s * trainSteps) / 1000),
    sigmas: all,
    initNoiseSigma: 1,
    inputScale: () => 1,
    step(i, latents, output) {
      const dt = all[i + 1]! - all[i]!;
      for (let k = 0; k < latents.length; k++) latents[k] = latents[k]! + dt * output[k]!;
    },
  };
}
