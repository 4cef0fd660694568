/**
 * Denoising schedulers, read from a diffusers `scheduler/scheduler_config.json`:
 * - Euler discrete (EulerDiscreteScheduler: the UNet family, SD 1.x / 2.x / SD-Turbo), in
 *   sigma space with epsilon or v prediction;
 * - flow-matching Euler (FlowMatchEulerDiscreteScheduler: FLUX), sigmas from 1 to 0 with a
 *   static or resolution-dependent shift.
 * Both expose the same plan: the model's timestep and input scale per step, and an Euler step.
 */

/** The subset of a model folder's scheduler/scheduler_config.json that the pipeline reads. */
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
  trained_betas?: number[] | null;
  use_karras_sigmas?: boolean;
  rescale_betas_zero_snr?: boolean;
  interpolation_type?: string;
  final_sigmas_type?: string;
  timestep_type?: string;
  sigma_min?: number | null;
  sigma_max?: number | null;
  use_exponential_sigmas?: boolean;
  use_beta_sigmas?: boolean;
  time_shift_type?: string;
  shift_terminal?: number | null;
  invert_sigmas?: boolean;
  stochastic_sampling?: boolean;
}

/** The sigmas and timesteps of one generation, and the Euler step between them. */
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

/** Refuses a config option that changes the schedule in a way this code does not implement. */
function refuse(config: SchedulerConfig, options: (keyof SchedulerConfig)[]): void {
  for (const option of options) {
    const value = config[option];
    if (value !== undefined && value !== null && value !== false) {
      throw new Error(`unsupported scheduler option ${option}=${JSON.stringify(value)} (${config._class_name ?? 'scheduler'}): Gantry would ignore it and denoise on a different schedule`);
    }
  }
}

/** numpy's round: halves to the even neighbour (np.round(812.5) === 812). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
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

/**
 * The training betas: trained_betas, or the beta_schedule, with the zero-terminal-SNR rescale
 * when asked. Rounded to float32 as diffusers keeps them (torch float32), so the sigmas derived
 * from them match its tables to float32 precision.
 */
function trainingBetas(config: SchedulerConfig): number[] {
  const trainSteps = config.num_train_timesteps ?? 1000;
  const betaStart = config.beta_start ?? 0.00085;
  const betaEnd = config.beta_end ?? 0.012;
  const schedule = config.beta_schedule ?? 'scaled_linear';
  let betas: number[];
  const f = Math.fround;
  if (Array.isArray(config.trained_betas) && config.trained_betas.length > 0) betas = config.trained_betas.map(f);
  else if (schedule === 'scaled_linear') betas = linspace(Math.sqrt(betaStart), Math.sqrt(betaEnd), trainSteps).map((b) => f(f(b) * f(b)));
  else if (schedule === 'linear') betas = linspace(betaStart, betaEnd, trainSteps).map(f);
  else if (schedule === 'squaredcos_cap_v2') {
    const alphaBar = (t: number): number => Math.cos(((t + 0.008) / 1.008) * Math.PI / 2) ** 2;
    betas = Array.from({ length: trainSteps }, (_, i) => f(Math.min(1 - alphaBar((i + 1) / trainSteps) / alphaBar(i / trainSteps), 0.999)));
  } else throw new Error(`unsupported beta_schedule ${schedule}: expected scaled_linear, linear or squaredcos_cap_v2`);
  return config.rescale_betas_zero_snr ? rescaleZeroTerminalSnr(betas) : betas;
}

/** Rescales betas to zero terminal SNR (Lin et al. 2023, Algorithm 1), as diffusers does. */
function rescaleZeroTerminalSnr(betas: number[]): number[] {
  let cumulative = 1;
  const sqrtBar = betas.map((b) => Math.sqrt((cumulative *= 1 - b)));
  const first = sqrtBar[0]!;
  const last = sqrtBar[sqrtBar.length - 1]!;
  const bar = sqrtBar.map((v) => ((v - last) * first) / (first - last)).map((v) => v * v);
  return bar.map((b, i) => 1 - (i === 0 ? b : b / bar[i - 1]!));
}

/** Timesteps of EulerDiscreteScheduler.set_timesteps for each timestep_spacing. */
function eulerTimesteps(config: SchedulerConfig, trainSteps: number, steps: number): number[] {
  const spacing = config.timestep_spacing ?? 'linspace';
  if (spacing === 'linspace') return linspace(0, trainSteps - 1, steps).reverse();
  if (spacing === 'leading') {
    const ratio = Math.floor(trainSteps / steps);
    return Array.from({ length: steps }, (_, i) => roundHalfEven(i * ratio) + (config.steps_offset ?? 0)).reverse();
  }
  if (spacing === 'trailing') {
    // np.round(np.arange(T, 0, -T / steps)) - 1: numpy rounds halves to even.
    const ratio = trainSteps / steps;
    return Array.from({ length: steps }, (_, i) => roundHalfEven(trainSteps - i * ratio) - 1);
  }
  throw new Error(`unsupported timestep_spacing ${spacing}: expected linspace, leading or trailing`);
}

/** Karras et al. (2022) sigmas between the schedule's ends, rho = 7. */
function karrasSigmas(sigmas: number[], config: SchedulerConfig, steps: number): number[] {
  const min = config.sigma_min ?? sigmas[sigmas.length - 1]!;
  const max = config.sigma_max ?? sigmas[0]!;
  const rho = 7;
  return linspace(0, 1, steps).map((r) => (max ** (1 / rho) + r * (min ** (1 / rho) - max ** (1 / rho))) ** rho);
}

/** The (fractional) training timestep of a sigma, interpolated in log-sigma (diffusers' _sigma_to_t). */
function sigmaToT(sigma: number, logSigmas: number[]): number {
  const logSigma = Math.log(Math.max(sigma, 1e-10));
  let low = 0;
  for (let i = 0; i < logSigmas.length; i++) if (logSigma - logSigmas[i]! >= 0) low = i;
  low = Math.min(low, logSigmas.length - 2);
  const lo = logSigmas[low]!;
  const hi = logSigmas[low + 1]!;
  const w = Math.min(1, Math.max(0, (lo - logSigma) / (lo - hi)));
  return (1 - w) * low + w * (low + 1);
}

function eulerDiscrete(config: SchedulerConfig, steps: number): Scheduler {
  refuse(config, ['use_exponential_sigmas', 'use_beta_sigmas']);
  if ((config.timestep_type ?? 'discrete') !== 'discrete') throw new Error(`unsupported timestep_type ${config.timestep_type}: expected discrete`);
  if ((config.interpolation_type ?? 'linear') !== 'linear') throw new Error(`unsupported interpolation_type ${config.interpolation_type}: expected linear`);
  const prediction = config.prediction_type ?? 'epsilon';
  if (prediction !== 'epsilon' && prediction !== 'v_prediction') {
    throw new Error(`unsupported prediction_type ${prediction}: expected epsilon or v_prediction`);
  }
  const betas = trainingBetas(config);
  const trainSteps = betas.length;
  const f = Math.fround;
  let cumulative = 1;
  const alphasCumprod = betas.map((beta) => (cumulative = f(cumulative * f(1 - beta))));
  // diffusers: with zero terminal SNR the last alpha_bar is 0; it is set to 2^-24 so sigma stays finite.
  if (config.rescale_betas_zero_snr) alphasCumprod[trainSteps - 1] = 2 ** -24;
  const trainSigmas = alphasCumprod.map((a) => f(Math.sqrt(f(f(1 - a) / a))));
  let timesteps = eulerTimesteps(config, trainSteps, steps);
  let stepSigmas = timesteps.map((t) => interpolate(trainSigmas, t));
  if (config.use_karras_sigmas) {
    stepSigmas = karrasSigmas(stepSigmas, config, steps);
    const logSigmas = trainSigmas.map(Math.log);
    timesteps = stepSigmas.map((sigma) => sigmaToT(sigma, logSigmas));
  }
  const finalType = config.final_sigmas_type ?? 'zero';
  if (finalType !== 'zero' && finalType !== 'sigma_min') throw new Error(`unsupported final_sigmas_type ${finalType}: expected zero or sigma_min`);
  const sigmas = [...stepSigmas, finalType === 'zero' ? 0 : trainSigmas[0]!];
  const maxSigma = Math.max(...sigmas);
  const spacing = config.timestep_spacing ?? 'linspace';
  const initNoiseSigma = spacing === 'linspace' || spacing === 'trailing' ? maxSigma : Math.sqrt(maxSigma * maxSigma + 1);
  return eulerPlan(timesteps, sigmas, initNoiseSigma, prediction);
}

function eulerPlan(timesteps: number[], sigmas: number[], initNoiseSigma: number, prediction: string): Scheduler {
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
  refuse(config, ['use_karras_sigmas', 'use_exponential_sigmas', 'use_beta_sigmas', 'invert_sigmas', 'stochastic_sampling']);
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
    const type = config.time_shift_type ?? 'exponential';
    if (type !== 'exponential' && type !== 'linear') throw new Error(`unsupported time_shift_type ${type}: expected exponential or linear`);
    sigmas = base.map((s) => (type === 'exponential' ? Math.exp(mu) / (Math.exp(mu) + (1 / s - 1)) : mu / (mu + (1 / s - 1))));
  } else {
    const shift = config.shift ?? 1;
    sigmas = base.map((s) => (shift * s) / (1 + (shift - 1) * s));
  }
  if (config.shift_terminal) {
    // Stretch so the last sigma lands on shift_terminal (diffusers' stretch_shift_to_terminal).
    const scale = (1 - sigmas[sigmas.length - 1]!) / (1 - config.shift_terminal);
    sigmas = sigmas.map((s) => 1 - (1 - s) / scale);
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
