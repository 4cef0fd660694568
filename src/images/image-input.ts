import { invalidParameter } from '../model/errors.js';
import type { ImageModelKind } from '../config/image-config.js';
import { isObject } from '../model/json.js';

/**
 * Input rules of the public image endpoints (spec, "Public endpoint input parameters"). They
 * run at submission, in the gateway, so a bad request is a 400 naming the field and no job is
 * ever created or charged. Defaults are applied by the image worker, which knows its model
 * (model-defaults.ts): resolveImageInput puts the endpoint's bounds on top of them.
 */

/** A validated input: what the client gave, fields it left out undefined. */
export interface ImageRequestFields {
  prompt: string;
  negativePrompt: string;
  width?: number;
  height?: number;
  numInferenceSteps?: number;
  guidance?: number;
  seed: number;
  imageFormat: 'jpeg' | 'png';
}

/** A validated input with every default applied. */
export interface ImageInput {
  prompt: string;
  negativePrompt: string;
  width: number;
  height: number;
  numInferenceSteps: number;
  guidance: number;
  /** -1 means "pick one at random"; the worker reports the seed it used. */
  seed: number;
  imageFormat: 'jpeg' | 'png';
}

/** The step range of each model kind; everything else is shared. */
export const STEP_RULES: Record<ImageModelKind, { default: number; min: number; max: number }> = {
  quality: { default: 28, min: 1, max: 50 },
  fast: { default: 4, min: 1, max: 8 },
};

/** Image sizes the public endpoints accept (the spec's default when the model names none). */
export const SIZE_RULES = { default: 1024, min: 256, max: 1536, multiple: 64 } as const;
/** Guidance the public endpoints accept (the spec's default when the model names none). */
export const GUIDANCE_RULES = { default: 7.5, min: 0, max: 10 } as const;
/** Longest prompt accepted (characters); tokenizers truncate long before this. */
export const MAX_PROMPT_CHARS = 10_000;

const FIELDS = new Set(['prompt', 'negative_prompt', 'width', 'height', 'num_inference_steps', 'guidance', 'seed', 'image_format']);

function text(field: string, value: unknown, required: boolean): string {
  if (value === undefined || value === null) {
    if (required) throw invalidParameter(field, 'is required');
    return '';
  }
  if (typeof value !== 'string') throw invalidParameter(field, 'must be a string');
  if (required && value.trim() === '') throw invalidParameter(field, 'must not be empty');
  if (value.length > MAX_PROMPT_CHARS) throw invalidParameter(field, `must be at most ${MAX_PROMPT_CHARS} characters`);
  return value;
}

function integer(field: string, value: unknown, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw invalidParameter(field, 'must be an integer');
  if (value < min || value > max) throw invalidParameter(field, `must be from ${min} to ${max}`);
  return value;
}

function size(field: string, value: unknown): number | undefined {
  const n = integer(field, value, SIZE_RULES.min, SIZE_RULES.max);
  if (n !== undefined && n % SIZE_RULES.multiple !== 0) throw invalidParameter(field, `must be divisible by ${SIZE_RULES.multiple}`);
  return n;
}

/**
 * Validates a public endpoint's input; throws a 400 AppError (`Invalid parameter: width must
 * be divisible by 64`) on the first bad or unknown field. Defaults are not applied here.
 *
 * @example validateImageInput('fast', { prompt: 'a red kite' }).numInferenceSteps === undefined
 */
export function validateImageInput(kind: ImageModelKind, input: unknown): ImageRequestFields {
  if (!isObject(input)) throw invalidParameter('input', 'must be a JSON object');
  for (const key of Object.keys(input)) {
    if (!FIELDS.has(key)) throw invalidParameter(key, `is not a known field (expected ${[...FIELDS].join(', ')})`);
  }
  const steps = STEP_RULES[kind];
  const guidance = input.guidance ?? undefined;
  if (guidance !== undefined) {
    if (typeof guidance !== 'number' || !Number.isFinite(guidance)) throw invalidParameter('guidance', 'must be a number');
    if (guidance < GUIDANCE_RULES.min || guidance > GUIDANCE_RULES.max) {
      throw invalidParameter('guidance', `must be from ${GUIDANCE_RULES.min} to ${GUIDANCE_RULES.max}`);
    }
  }
  const seed = input.seed ?? -1;
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) throw invalidParameter('seed', 'must be an integer (-1 for a random seed)');
  const format = input.image_format ?? 'jpeg';
  if (format !== 'jpeg' && format !== 'png') throw invalidParameter('image_format', 'must be jpeg or png');
  return {
    prompt: text('prompt', input.prompt, true),
    negativePrompt: text('negative_prompt', input.negative_prompt, false),
    width: size('width', input.width),
    height: size('height', input.height),
    numInferenceSteps: integer('num_inference_steps', input.num_inference_steps, steps.min, steps.max),
    guidance,
    seed,
    imageFormat: format,
  };
}

/** A model's request defaults, as far as the endpoint needs them (model-defaults.ts). */
export interface RequestDefaults {
  steps: number;
  guidance: number;
  width: number;
  height: number;
}

/**
 * The spec's defaults of an endpoint: what applies when the model is not known (a worker
 * elsewhere) or names none.
 *
 * @example specDefaults('fast').steps === 4
 */
export function specDefaults(kind: ImageModelKind): RequestDefaults {
  return { steps: STEP_RULES[kind].default, guidance: GUIDANCE_RULES.default, width: SIZE_RULES.default, height: SIZE_RULES.default };
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/**
 * Fills in what the client left out from the model's defaults, with the endpoint's bounds on
 * top: steps into the endpoint's range, sizes into 256–1536 on the 64 grid, guidance into 0–10.
 *
 * @example resolveImageInput('fast', validateImageInput('fast', { prompt: 'x' }), { steps: 28, guidance: 3.5, width: 1024, height: 1024 }).numInferenceSteps === 8
 */
export function resolveImageInput(kind: ImageModelKind, fields: ImageRequestFields, defaults: RequestDefaults): ImageInput {
  const steps = STEP_RULES[kind];
  const onGrid = (n: number): number => clamp(Math.round(n / SIZE_RULES.multiple) * SIZE_RULES.multiple, SIZE_RULES.min, SIZE_RULES.max);
  return {
    ...fields,
    width: fields.width ?? onGrid(defaults.width),
    height: fields.height ?? onGrid(defaults.height),
    numInferenceSteps: fields.numInferenceSteps ?? clamp(Math.round(defaults.steps), steps.min, steps.max),
    guidance: fields.guidance ?? clamp(defaults.guidance, GUIDANCE_RULES.min, GUIDANCE_RULES.max),
  };
}
