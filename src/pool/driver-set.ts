import type { AnyStartSpec, ContainerStartSpec, WorkerDriver, WorkerStartSpec } from './driver.js';

/** Whether a start spec is for a container (it names an image). */
export function isContainerSpec(spec: AnyStartSpec): spec is ContainerStartSpec {
  return 'image' in spec && typeof spec.image === 'string';
}

/**
 * The drivers of one gateway behind one WorkerDriver: a spec naming an image goes to the
 * container driver, a command to the process driver. The pool stays unaware of the kinds;
 * cleaning up after a killed gateway asks both.
 *
 * @example
 * const driver = createDriverSet({ process: createLocalProcessDriver(), container: createDockerDriver(options) });
 */
export function createDriverSet(drivers: { process: WorkerDriver<WorkerStartSpec>; container: WorkerDriver<ContainerStartSpec> }): WorkerDriver {
  const all = [drivers.process, drivers.container];
  return {
    kind: `${drivers.process.kind}+${drivers.container.kind}`,
    start: (spec, output, progress) => (isContainerSpec(spec) ? drivers.container.start(spec, output, progress) : drivers.process.start(spec, output, progress)),
    async reapOrphans(graceMs) {
      const counts = await Promise.all(all.map((d) => d.reapOrphans?.(graceMs) ?? 0));
      return counts.reduce((a, b) => a + b, 0);
    },
    hosts: () => all.flatMap((d) => d.hosts?.() ?? []),
    prepullTargets: (spec) => drivers.container.prepullTargets?.(spec) ?? [],
    loads: () => all.flatMap((d) => d.loads?.() ?? []),
    close() {
      for (const d of all) d.close?.();
    },
  };
}
