import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The process's open-file limit (RLIMIT_NOFILE): `soft` is what applies, `hard` how far it may be raised. */
export interface FileLimit {
  soft: number;
  hard: number;
}

/** What raiseFileLimit did: the limit after, the soft limit before, and how it was raised or why not. */
export interface FileLimitRaise {
  limit: FileLimit;
  softBefore: number;
  outcome: 'raised' | 'at-hard-limit' | 'not-raised';
  /** Why it was not raised (prlimit missing or refused). */
  reason?: string;
}

/**
 * `/proc/self/limits`'s "Max open files" line, or undefined where there is no such file (not
 * Linux). An `unlimited` hard limit reads as the kernel's most (`/proc/sys/fs/nr_open`).
 *
 * @example parseFileLimit('Max open files            1024                 4096                 files') // { soft: 1024, hard: 4096 }
 */
export function parseFileLimit(limits: string, nrOpen = 1_048_576): FileLimit | undefined {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(limits);
  if (!m) return undefined;
  const value = (text: string): number => (text === 'unlimited' ? nrOpen : Number(text));
  return { soft: value(m[1]!), hard: value(m[2]!) };
}

/** This process's open-file limit, read from /proc (undefined where it cannot be read). */
export function readFileLimit(): FileLimit | undefined {
  try {
    return parseFileLimit(readFileSync('/proc/self/limits', 'utf8'), nrOpen());
  } catch {
    return undefined;
  }
}

function nrOpen(): number {
  try {
    return Number(readFileSync('/proc/sys/fs/nr_open', 'utf8').trim()) || 1_048_576;
  } catch {
    return 1_048_576;
  }
}

/**
 * Raises this process's soft open-file limit to its hard one. Node has no setrlimit, so it asks
 * util-linux's `prlimit --pid <own pid>` (a process may raise its own soft limit up to the hard
 * one without privileges), then reads the limit back from /proc: what it reports is what holds.
 * A limit already at the hard one, or a system without prlimit, is left as it is and said so.
 *
 * @example const { limit, outcome } = raiseFileLimit(); // outcome 'raised', limit.soft === limit.hard
 */
export function raiseFileLimit(): FileLimitRaise | undefined {
  const before = readFileLimit();
  if (!before) return undefined;
  if (before.soft >= before.hard) return { limit: before, softBefore: before.soft, outcome: 'at-hard-limit' };
  const run = spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${before.hard}:${before.hard}`], { encoding: 'utf8', timeout: 5_000 });
  const after = readFileLimit() ?? before;
  if (after.soft > before.soft) return { limit: after, softBefore: before.soft, outcome: 'raised' };
  const reason = run.error ? `prlimit could not run (${(run.error as NodeJS.ErrnoException).code ?? run.error.message})` : `prlimit failed: ${(run.stderr || `exit ${run.status}`).trim().slice(0, 200)}`;
  return { limit: after, softBefore: before.soft, outcome: 'not-raised', reason };
}
