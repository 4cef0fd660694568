import { invalidParameter } from '../errors.js';
import type { ImageModelKind } from './pricing.js';

/**
 * Input rules of the public image endpoints (spec, "Public endpoint input parameters"). They
 * run at submission, in the gateway, so a bad request is a 400 naming the field and no job is
 * ever created or charged; the image worker applies the same function to fill in defaults.
 */

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

export const SIZE_RULES = { default: 1024, min: 256, max: 1536, multiple: 64 } as const;
export const GUIDANCE_RULES = { default: 7.5, min: 0, max: 10 } as const;
/** Longest prompt accepted (characters); tokenizers truncate long before this. */
export const MAX_PROMPT_CHARS = 10_000;

const FIELDS = new Set(['prompt', 'negative_prompt', 'width', 'height', 'num_inference_steps', 'guidance', 'seed', 'image_format']);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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

function integer(field: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw invalidParameter(field, 'must be an integer');
  if (value < min || value > max) throw invalidParameter(field, `must be from ${min} to ${max}`);
  return value;
}

function size(field: string, value: unknown): number {
  const n = integer(field, value, SIZE_RULES.default, SIZE_RULES.min, SIZE_RULES.max);
  if (n % SIZE_RULES.multiple !== 0) throw invalidParameter(field, `must be divisible by ${SIZE_RULES.multiple}`);
  return n;
}

/**
 * Validates a public endpoint's input and applies the defaults; throws a 400 AppError
 * (`Invalid parameter: width must be divisible by 64`) on the first bad or unknown field.
 *
 * @example validateImageInput('fast', { prompt: 'a red kite' }).numInferenceSteps === 4
 */
export function validateImageInput(kind: ImageModelKind, input: unknown): ImageInput {
  if (!isObject(input)) throw invalidParameter('input', 'must be a JSON object');
  for (const key of Object.keys(input)) {
    if (!FIELDS.has(key)) throw invalidParameter(key, `is not a known field (expected ${[...FIELDS].join(', ')})`);
  }
  const steps = STEP_RULES[kind];
  const guidance = input.guidance ?? GUIDANCE_RULES.default;
  if (typeof guidance !== 'number' || !Number.isFinite(guidance)) throw invalidParameter('guidance', 'must be a number');
  if (guidance < GUIDANCE_RULES.min || guidance > GUIDANCE_RULES.max) {
    throw invalidParameter('guidance', `must be from ${GUIDANCE_RULES.min} to ${GUIDANCE_RULES.max}`);
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
    numInferenceSteps: integer('num_inference_steps', input.num_inference_steps, steps.default, steps.min, steps.max),
    guidance,
    seed,
    imageFormat: format,
  };
}
