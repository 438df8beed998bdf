import { spawn } from 'node:child_process';

export interface ProcessOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` to its exit with `env` as its whole environment, and answers its exit code and
 * everything it printed on each stream. One that has not exited after `timeoutMs` is killed
 * (its case then fails on what it printed, not on a hang).
 */
export function runToExit(command: string, args: readonly string[], env: Record<string, string | undefined>, timeoutMs = 50_000): Promise<ProcessOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const kill = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(kill);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(kill);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The JSON log records a service printed, one per line (a line that is not JSON throws). */
export function logRecords<T = Record<string, unknown>>(text: string): T[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}
