import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '@latchkey/testing';

/**
 * A folder to run `make up` or `make cluster-up`'s scripts in as a user does, whose code is this
 * checkout's (linked) and whose `.data/` is new: a run of the developer's own is neither in its
 * way nor touched. `.data/bin` (FerretDB, nats-server) is the checkout's.
 */
export interface LocalRun {
  root: string;
  /** Runs `deploy/local/<script>.sh` with `env` alone, to its exit. */
  run(script: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }>;
  /** The processes a script recorded under `.data/<dir>` (`run` or `cluster/run`), and whether each still runs. */
  recorded(dir: string): Array<{ name: string; pid: number; alive: boolean }>;
  /** Removes the folder. */
  remove(): void;
}

export function localRun(): LocalRun {
  const checkout = repoRoot();
  const root = mkdtempSync(join(tmpdir(), 'latchkey-local-'));
  for (const entry of ['deploy', 'services', 'libs', 'packages', 'node_modules']) symlinkSync(join(checkout, entry), join(root, entry));
  mkdirSync(join(root, '.data'), { mode: 0o700 });
  symlinkSync(join(checkout, '.data', 'bin'), join(root, '.data', 'bin'));
  return {
    root,
    run: (script, env) =>
      new Promise((resolve) => {
        execFile('bash', [join(root, 'deploy', 'local', `${script}.sh`)], { env, timeout: 240_000 }, (error, stdout, stderr) =>
          resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
      }),
    recorded(dir) {
      const at = join(root, '.data', dir);
      if (!existsSync(at)) return [];
      return readdirSync(at)
        .filter((file) => file.endsWith('.pid'))
        .map((file) => {
          const pid = Number(readFileSync(join(at, file), 'utf8'));
          return { name: file.replace(/\.pid$/, ''), pid, alive: isAlive(pid) };
        });
    },
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What every local run gets: the PATH, and the Node 24 running the test (nothing to install). */
export function baseEnvironment(): Record<string, string> {
  return { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? tmpdir(), LATCHKEY_NODE: process.execPath };
}
