import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { AppError } from '@latchkey/errors';
import type { CompileResult } from './compile-source.js';
import { sdkLocation } from './sdk-location.js';

/**
 * The child's entry: beside this module once built; when this module runs from its sources (a
 * service's tests), the built one (`make build` precedes the tests).
 */
function childEntry(): string {
  const beside = fileURLToPath(new URL('./compiler-process.js', import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL('../dist/compiler-process.js', import.meta.url));
}

export interface CompilerOptions {
  /**
   * The longest a compile may take, from when it was asked for, its wait for the child included
   * (its callers wait 30 s in all): past it, the compile fails alone, with a diagnostic, and a
   * child still at it is killed.
   */
  timeoutMs?: number;
  /** The child's V8 heap limit. */
  maxOldSpaceMb?: number;
  /** Compiles waiting for the child at most; past it, a compile is refused at once (503). */
  maxWaiting?: number;
  /** The longest a compile waits for the child (503 past it), within `timeoutMs`. */
  maxWaitMs?: number;
  /** The child's module: the built `compiler-process.js` unless a test gives its own. */
  entry?: string;
}

interface Job {
  source: string;
  filename: string | undefined;
  /** When the compile must have ended (`performance.now()` time). */
  deadline: number;
  resolve(value: CompileResult): void;
  reject(error: Error): void;
  /** Ends a wait past `maxWaitMs`: its caller would give up before it compiled. */
  waitTimer: NodeJS.Timeout;
}

/** A compile that ended without the child's answer: the source's failure, told as a diagnostic. */
const failed = (message: string): CompileResult => ({ ok: false, diagnostics: [{ severity: 'error', message }] });

/**
 * Compiles submitted source (esbuild, then TypeScript) in a child process started with an
 * empty environment, in the SDK's folder: whatever the bundler or the compiler could be made to
 * read, the server's environment (secrets included) is not in that process, and a compile that
 * hangs or swells costs only the child. Compiling takes a few hundred milliseconds of CPU, off
 * the service's event loop. The child starts on first use and is kept.
 *
 * Every environment's compiles share the child, so one at a time goes to it, and the rest wait
 * in a bounded line: a compile that hangs or kills the child fails alone, as a compile error
 * (`ok: false`, one diagnostic), and the next one gets a fresh child. Each compile has one
 * deadline, from when it was asked for: its callers stop waiting at 30 s, and a compile past
 * it would be work for nobody.
 */
export function createCompiler(options: CompilerOptions = {}) {
  const timeoutMs = options.timeoutMs ?? 25_000;
  const maxWaiting = options.maxWaiting ?? 16;
  const maxWaitMs = Math.min(options.maxWaitMs ?? 10_000, timeoutMs);
  let child: ChildProcess | undefined;
  const waiting: Job[] = [];
  let current: { job: Job; child: ChildProcess; timer: NodeJS.Timeout } | undefined;
  let closed = false;

  /** Ends the compile the child has, and hands the child the next one. */
  function finish(settle: (job: Job) => void) {
    const ended = current;
    if (!ended) return;
    current = undefined;
    clearTimeout(ended.timer);
    settle(ended.job);
    next();
  }

  function start(): ChildProcess {
    const started = fork(options.entry ?? childEntry(), [], {
      env: {},
      cwd: sdkLocation().dir,
      execArgv: [`--max-old-space-size=${options.maxOldSpaceMb ?? 256}`],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    started.on('message', (reply: { result?: CompileResult; error?: string }) => {
      if (current?.child !== started) return;
      finish((job) => (reply.result ? job.resolve(reply.result) : job.reject(new Error(reply.error ?? 'the compiler failed'))));
    });
    // A child that dies compiling (its heap limit, say) fails that compile: the source's doing.
    started.on('exit', (code, signal) => {
      if (child === started) child = undefined;
      if (current?.child === started) finish((job) => job.resolve(failed(`The compiler stopped while compiling this source (${signal ?? code}): it may have run out of memory`)));
    });
    started.on('error', (error) => {
      if (child === started) child = undefined;
      if (current?.child === started) finish((job) => job.reject(error));
    });
    // The service may exit while the child idles.
    started.unref();
    started.channel?.unref();
    return started;
  }

  /** Hands the first waiting compile to the child (a fresh one if the last was killed). */
  function next() {
    if (current || closed) return;
    const job = waiting.shift();
    if (!job) {
      child?.channel?.unref();
      return;
    }
    clearTimeout(job.waitTimer);
    const running = (child ??= start());
    const timer = setTimeout(() => {
      // Let go of the child before the next compile is handed one.
      if (child === running) child = undefined;
      running.kill('SIGKILL');
      finish((timedOut) => timedOut.resolve(failed(`Compiling took longer than ${timeoutMs} ms; it was stopped`)));
    }, Math.max(0, job.deadline - performance.now()));
    current = { job, child: running, timer };
    running.channel?.ref();
    running.send({ id: 1, source: job.source, ...(job.filename ? { filename: job.filename } : {}) }, (error) => {
      if (error && current?.job === job) finish((failed) => failed.reject(error));
    });
  }

  function compile(source: string, filename?: string): Promise<CompileResult> {
    if (closed) return Promise.reject(new AppError('service_unavailable', 'This replica is stopping; try again'));
    if (waiting.length >= maxWaiting) {
      return Promise.reject(new AppError('service_unavailable', 'Too many compiles are waiting for this replica\'s compiler; try again'));
    }
    return new Promise((resolve, reject) => {
      const job: Job = {
        source,
        filename,
        deadline: performance.now() + timeoutMs,
        resolve,
        reject,
        waitTimer: setTimeout(() => {
          waiting.splice(waiting.indexOf(job), 1);
          reject(new AppError('service_unavailable', 'This replica\'s compiler stayed busy; try again'));
        }, maxWaitMs),
      };
      waiting.push(job);
      next();
    });
  }

  return {
    compile,
    /** Stops the child; the compile it has and those waiting fail. */
    async close(): Promise<void> {
      closed = true;
      for (const job of waiting.splice(0)) {
        clearTimeout(job.waitTimer);
        job.reject(new AppError('service_unavailable', 'This replica is stopping; try again'));
      }
      const running = child;
      child = undefined;
      if (!running || running.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        running.once('exit', () => resolve());
        running.kill('SIGTERM');
      });
    },
  };
}

export type Compiler = ReturnType<typeof createCompiler>;
