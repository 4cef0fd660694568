/**
 * Schedulers against reference tables written from diffusers' formulas by an independent
 * script (test/images/fixtures/make-scheduler-tables.py, numpy, diffusers' dtypes), kept with
 * its output in scheduler-tables.json. Tolerances: diffusers keeps alphas_cumprod and the final
 * sigmas in float32, Gantry computes in float64, so sigmas agree to float32 precision
 * (relative 2e-6 where the cumulative product has run 1000 float32 multiplications).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createScheduler, roundHalfEven, type SchedulerConfig } from '../../src/images/scheduler.js';

interface Case {
  name: string;
  config: SchedulerConfig;
  steps: number;
  imageSeqLen: number | null;
  timesteps: number[];
  sigmas: number[];
  initNoiseSigma: number;
}

const tables = JSON.parse(readFileSync(new URL('./fixtures/scheduler-tables.json', import.meta.url), 'utf8')) as { cases: Case[] };

function expectClose(actual: number[], expected: number[], relative: number, absolute: number, what: string): void {
  expect(actual.length, what).toBe(expected.length);
  actual.forEach((a, i) => {
    const e = expected[i]!;
    expect(Math.abs(a - e), `${what}[${i}]: ${a} vs ${e}`).toBeLessThanOrEqual(Math.max(absolute, relative * Math.abs(e)));
  });
}

describe('schedulers against diffusers reference tables', () => {
  it('has the cases the issue names', () => {
    const names = tables.cases.map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(['trailing, 16 steps (812.5 rounds to 812)', 'FLUX.1-dev 1024², 28 steps', 'FLUX.1-schnell, 4 steps']));
  });

  for (const c of tables.cases) {
    it(c.name, () => {
      const s = createScheduler(c.config, c.steps, c.imageSeqLen ?? undefined);
      const flow = c.config._class_name === 'FlowMatchEulerDiscreteScheduler';
      const integerSpacing = !flow && !c.config.use_karras_sigmas && c.config.timestep_spacing !== undefined && c.config.timestep_spacing !== 'linspace';
      if (integerSpacing) expect(s.timesteps).toEqual(c.timesteps);
      else expectClose(s.timesteps, c.timesteps, flow ? 1e-7 : 2e-5, flow ? 1e-7 : 2e-4, 'timesteps');
      expectClose(s.sigmas, c.sigmas, flow ? 1e-7 : 2e-6, flow ? 1e-7 : 1e-6, 'sigmas');
      expect(Math.abs(s.initNoiseSigma - c.initNoiseSigma)).toBeLessThanOrEqual(2e-6 * c.initNoiseSigma);
    });
  }

  it('trailing spacing at 16 steps rounds 812.5 to even, as numpy does', () => {
    const s = createScheduler({ _class_name: 'EulerDiscreteScheduler', timestep_spacing: 'trailing' }, 16);
    expect(s.timesteps.slice(0, 4)).toEqual([999, 937, 874, 811]);
    expect([roundHalfEven(812.5), roundHalfEven(937.5), roundHalfEven(-0.5), roundHalfEven(2.5000001)]).toEqual([812, 938, -0, 3]);
  });

  it('refuses options it would otherwise ignore, naming them', () => {
    const euler = { _class_name: 'EulerDiscreteScheduler' };
    const flow = { _class_name: 'FlowMatchEulerDiscreteScheduler' };
    expect(() => createScheduler({ ...euler, use_exponential_sigmas: true }, 4)).toThrow(/use_exponential_sigmas/);
    expect(() => createScheduler({ ...euler, timestep_type: 'continuous' }, 4)).toThrow(/timestep_type/);
    expect(() => createScheduler({ ...euler, interpolation_type: 'log_linear' }, 4)).toThrow(/interpolation_type/);
    expect(() => createScheduler({ ...euler, beta_schedule: 'sigmoid' }, 4)).toThrow(/beta_schedule/);
    expect(() => createScheduler({ ...flow, use_karras_sigmas: true }, 4)).toThrow(/use_karras_sigmas/);
    expect(() => createScheduler({ ...flow, invert_sigmas: true }, 4)).toThrow(/invert_sigmas/);
    expect(() => createScheduler({ ...flow, stochastic_sampling: true }, 4)).toThrow(/stochastic_sampling/);
    expect(() => createScheduler({ ...euler, use_karras_sigmas: false, trained_betas: null }, 4)).not.toThrow();
  });
});
