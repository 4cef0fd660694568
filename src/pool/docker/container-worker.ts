import { constants } from 'node:os';
import type { Logger } from 'pino';
import type { WorkerExit, WorkerHandle, WorkerOutput } from '../driver.js';
import type { DockerHost, HostedWorker } from './docker-hosts.js';
import { EngineError } from './engine-client.js';
import { createLogFrameReader } from './log-frames.js';

/** After the container exited, how long its log stream may take to deliver the last lines. */
const LOG_DRAIN_MS = 2_000;
/** The exit detail of a container removed by someone else (`docker rm -f`). */
const REMOVED = 'its container was removed by someone else';
/** Pause before asking again for the exit of a container whose wait call broke (the host is checked meanwhile). */
const WAIT_RETRY_MS = 1_000;
/** While a wait call is out, the container's state is also looked at this often, so an exit a wait call fails to report still ends the worker. */
const EXIT_CHECK_MS = 5_000;

/** What one container handle is given. */
export interface ContainerWorkerOptions {
  id: string;
  host: DockerHost;
  deviceIds: string[];
  output: WorkerOutput;
  /** Checks the host now (a call to it broke): it may be marked down, which ends this worker. */
  checkHost(): Promise<void>;
  /** Gives the host's devices back; called once, before `exited` settles. */
  release(): void;
  logger: Logger;
}

/** An engine's refusal to pause that is the host's, not the container's: no freezer (cgroups), or a rootless engine. */
const CANNOT_PAUSE = /freezer|cgroup|not supported|rootless/i;

/** What a wait call answers. */
interface WaitAnswer {
  StatusCode?: number;
  Error?: { Message?: string } | null;
}

const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/** Docker reports a worker killed by signal N (through its init) as exit code 128 + N. */
function exitOf(code: number, oomKilled: boolean, memoryNote: string): WorkerExit {
  const signal = code > 128 ? (SIGNALS.get(code - 128) ?? null) : null;
  return { code, signal, ...(oomKilled ? { detail: `out of memory${memoryNote}` } : {}) };
}

/**
 * One worker container: follows its log stream into the worker's log, waits for it to exit
 * (asking again after a broken connection, unless the host is lost), then removes it.
 * `stop` is the drain of docs/scaling.md: SIGTERM to the container's init, SIGKILL after the
 * grace.
 */
export class ContainerWorker implements WorkerHandle, HostedWorker {
  readonly pid = null;
  readonly host: string;
  readonly container: string;
  readonly deviceIds: string[];
  readonly exited: Promise<WorkerExit>;
  /** Settles once the exited container was removed (or its removal failed), or at once when lost with its host. */
  readonly removed: Promise<void>;
  private settleRemoved: (() => void) | undefined;
  private settle: ((exit: WorkerExit) => void) | undefined;
  private ended = false;
  private stopping: Promise<WorkerExit> | undefined;
  /** Paused in the warm pool (flashboot). */
  private paused = false;
  private logsDone: Promise<void> = Promise.resolve();
  /** Ends the calls in flight (log stream, exit wait) once the worker counts as gone. */
  private readonly calls = new AbortController();

  constructor(private readonly options: ContainerWorkerOptions) {
    this.host = options.host.config.name;
    this.container = options.id.slice(0, 12);
    this.deviceIds = options.deviceIds;
    this.exited = new Promise<WorkerExit>((resolve) => (this.settle = resolve));
    this.removed = new Promise<void>((resolve) => (this.settleRemoved = resolve));
    this.followLogs();
    void this.waitForExit();
  }

  /**
   * Pauses the container (POST /containers/{id}/pause: the cgroup freezer); its devices stay
   * held by this handle. On a host whose engine cannot pause (no freezer) it rejects without
   * asking again: the first refusal is remembered for the host and logged once, and the pool
   * stops the worker instead (flashboot falls back to not pausing there).
   */
  async pause(): Promise<void> {
    const { host } = this.options;
    if (host.pauseRefused !== null) throw new Error(`Docker host ${host.config.name} cannot pause containers (${host.pauseRefused})`);
    try {
      await this.engine.call('POST', `/containers/${this.options.id}/pause`);
    } catch (err) {
      if (err instanceof EngineError && CANNOT_PAUSE.test(err.message)) {
        host.pauseRefused = err.message;
        this.options.logger.warn(
          { host: host.config.name, engine: host.engineName, error: err.message },
          'Docker host cannot pause containers (no cgroup freezer): flashboot workers on it are stopped when idle instead of paused',
        );
      }
      throw err;
    }
    this.paused = true;
  }

  /** Unpauses it (POST /containers/{id}/unpause): its processes go on where they were. */
  async resume(): Promise<void> {
    await this.engine.call('POST', `/containers/${this.options.id}/unpause`);
    this.paused = false;
  }

  stop(graceMs: number): Promise<WorkerExit> {
    this.stopping ??= (async () => {
      if (this.ended) return this.exited;
      // A paused container would hold a SIGTERM until thawed; it holds no job (the warm pool
      // pauses only idle workers), so it is killed outright and its devices freed at once.
      if (this.paused) {
        await this.signal('SIGKILL');
        return this.exited;
      }
      // The grace runs from now, even if the engine is slow to take the SIGTERM.
      const timer = setTimeout(() => void this.signal('SIGKILL'), graceMs);
      timer.unref();
      await this.signal('SIGTERM');
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    })();
    return this.stopping;
  }

  /** Its host was marked down: the worker counts as gone now (what still runs there is removed when the host is back). */
  lost(detail: string): void {
    this.calls.abort();
    this.finish({ code: null, signal: null, detail });
    this.settleRemoved?.(); // what still runs there is the leftover sweep's
  }

  private get engine() {
    return this.options.host.engine;
  }

  private async signal(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    try {
      await this.engine.call('POST', `/containers/${this.options.id}/kill?signal=${signal}`);
    } catch (err) {
      // 409: not running any more; 404: gone. Anything else: the exit wait will tell.
      if (!(err instanceof EngineError)) this.options.logger.warn({ err, container: this.container, signal }, 'could not signal a worker container');
    }
  }

  private followLogs(): void {
    this.logsDone = (async () => {
      try {
        const logs = await this.engine.open('GET', `/containers/${this.options.id}/logs?follow=1&stdout=1&stderr=1`, { timeoutMs: 0, signal: this.calls.signal });
        const read = createLogFrameReader(this.options.output);
        await new Promise<void>((resolve) => {
          logs.on('data', read);
          logs.on('close', resolve);
          logs.on('error', () => resolve());
        });
      } catch {
        // No logs (the engine went away): the exit tells the rest.
      }
    })();
  }

  private async waitForExit(): Promise<void> {
    let exit: WorkerExit | null = null;
    while (exit === null && !this.ended) {
      try {
        const watch = { over: false };
        const result = await Promise.race([
          this.engine.call('POST', `/containers/${this.options.id}/wait`, { timeoutMs: 0, signal: this.calls.signal }) as Promise<WaitAnswer | undefined>,
          this.notRunning(watch),
        ]).finally(() => (watch.over = true));
        // Podman answers a wait on a container removed meanwhile with StatusCode 0 and an Error: no exit code then.
        exit = await this.inspectExit(result?.Error?.Message ? null : (result?.StatusCode ?? null));
      } catch (err) {
        if (err instanceof EngineError && err.status === 404) exit = { code: null, signal: null, detail: REMOVED };
        else {
          await this.options.checkHost();
          if (!this.ended) await new Promise((r) => setTimeout(r, WAIT_RETRY_MS).unref());
        }
      }
    }
    if (exit === null) return; // lost with its host
    await Promise.race([this.logsDone, new Promise((r) => setTimeout(r, LOG_DRAIN_MS).unref())]);
    this.calls.abort();
    // The pool hears of the exit (and requeues what the worker held) before the removal, which a busy engine may take seconds over.
    this.finish(exit);
    await this.engine.call('DELETE', `/containers/${this.options.id}?force=1&v=1`, { timeoutMs: 10_000 }).catch((err: unknown) => {
      if (!(err instanceof EngineError && err.status === 404)) this.options.logger.warn({ err, container: this.container }, 'could not remove an exited worker container');
    });
    this.settleRemoved?.();
  }

  /** Answers like a wait call once the container is seen not running (looked at every EXIT_CHECK_MS until `watch.over`); throws the engine's 404 once it is gone. */
  private async notRunning(watch: { over: boolean }): Promise<WaitAnswer> {
    for (;;) {
      await new Promise((r) => setTimeout(r, EXIT_CHECK_MS).unref());
      if (watch.over || this.ended) return new Promise<never>(() => undefined);
      try {
        const info = (await this.engine.call('GET', `/containers/${this.options.id}/json`, { timeoutMs: 10_000 })) as { State?: { Running?: boolean; Status?: string; ExitCode?: number } };
        if (info.State?.Running === false && info.State.Status !== 'created') return { StatusCode: info.State.ExitCode ?? 0 };
      } catch (err) {
        if (err instanceof EngineError && err.status === 404) throw err;
        // Anything else: the wait call, or the next look, will tell.
      }
    }
  }

  /** The exit code (from wait, else inspect) and whether the kernel's OOM killer ended it. */
  private async inspectExit(waited: number | null): Promise<WorkerExit> {
    try {
      const info = (await this.engine.call('GET', `/containers/${this.options.id}/json`, { timeoutMs: 10_000 })) as {
        State?: { ExitCode?: number; OOMKilled?: boolean };
        HostConfig?: { Memory?: number };
      };
      const memory = info.HostConfig?.Memory ? ` (limit ${Math.round(info.HostConfig.Memory / 1024 / 1024)} MiB)` : '';
      return exitOf(waited ?? info.State?.ExitCode ?? 0, info.State?.OOMKilled === true, memory);
    } catch (err) {
      // Gone before this handle removed it: `docker rm -f` from outside, a crash like any other.
      const removed = err instanceof EngineError && err.status === 404 ? { detail: REMOVED } : {};
      return { ...(waited === null ? { code: null, signal: null } : exitOf(waited, false, '')), ...removed };
    }
  }

  private finish(exit: WorkerExit): void {
    if (this.ended) return;
    this.ended = true;
    this.options.release();
    this.settle?.(exit);
  }
}
