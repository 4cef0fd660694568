// Runs the built `gantry` CLI in a child process (asynchronously: the test gateway lives in
// the test's own process) and keeps what it printed.
import { spawnOwned } from '../helpers/processes.js';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Everything any run printed, so a test can check that no key ever shows up. */
export const printed: string[] = [];

/** Runs `gantry args`; `onStdout` is called with all of its stdout so far each time more comes. */
export function runCli(args: string[], env: Record<string, string | undefined>, stdin?: string, onStdout?: (stdout: string) => void): Promise<CliResult> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run 'npm run build' first`);
  return new Promise((resolve, reject) => {
    const child = spawnOwned(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      onStdout?.(stdout);
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    if (stdin !== undefined) child.stdin?.end(stdin);
    child.on('error', reject);
    child.on('close', (code) => {
      printed.push(stdout, stderr);
      resolve({ code, stdout, stderr });
    });
  });
}
