import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CompileResult } from './compile-source.js';
import { sdkLocation } from './sdk-location.js';

const WARM_SOURCE = `import { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'warm', exec: () => null });\n`;

export interface CompilerOptions {
  /** A compile taking longer than this kills the child (and fails every compile in it). */
  timeoutMs?: number;
  /** The child's V8 heap limit. */
  maxOldSpaceMb?: number;
}

/**
 * Compiles submitted source (esbuild, then TypeScript) in a child process started with an
 * empty environment, in the SDK's folder: whatever the bundler or the compiler could be made to
 * read, the server's environment (secrets included) is not in that process, and a compile that
 * hangs or swells costs only the child. Compiling takes a few hundred milliseconds of CPU, off
 * the service's event loop. The child starts on first use and is kept.
 */
/**
 * The child's entry: beside this module once built; when this module runs from its sources (a
 * service's tests), the built one (`make build` precedes the tests).
 */
function childEntry(): string {
  const beside = fileURLToPath(new URL('./compiler-process.js', import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL('../dist/compiler-process.js', import.meta.url));
}

export function createCompiler(options: CompilerOptions = {}) {
  const timeoutMs = options.timeoutMs ?? 25_000;
  let child: ChildProcess | undefined;
  let nextId = 1;
  const pending = new Map<number, { resolve(value: CompileResult): void; reject(error: Error): void; timer: NodeJS.Timeout }>();

  function failAll(error: Error) {
    for (const call of pending.values()) {
      clearTimeout(call.timer);
      call.reject(error);
    }
    pending.clear();
  }

  function start(): ChildProcess {
    const started = fork(childEntry(), [], {
      env: {},
      cwd: sdkLocation().dir,
      execArgv: [`--max-old-space-size=${options.maxOldSpaceMb ?? 256}`],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    started.on('message', (reply: { id: number; result?: CompileResult; error?: string }) => {
      const call = pending.get(reply.id);
      if (!call) return;
      pending.delete(reply.id);
      clearTimeout(call.timer);
      if (reply.result) call.resolve(reply.result);
      else call.reject(new Error(reply.error ?? 'the compiler failed'));
    });
    started.on('exit', (code, signal) => {
      if (child === started) child = undefined;
      failAll(new Error(`the compiler process exited (${signal ?? code})`));
    });
    started.on('error', (error) => {
      if (child === started) child = undefined;
      failAll(error);
    });
    // The service may exit while the child idles.
    started.unref();
    started.channel?.unref();
    return started;
  }

  function compile(source: string, filename?: string): Promise<CompileResult> {
    const running = (child ??= start());
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`compiling took longer than ${timeoutMs} ms`));
        running.kill('SIGKILL');
      }, timeoutMs);
      pending.set(id, { resolve, reject, timer });
      running.channel?.ref();
      running.send({ id, source, ...(filename ? { filename } : {}) }, (error) => {
        if (error) {
          clearTimeout(timer);
          pending.delete(id);
          reject(error);
        }
      });
    }).finally(() => {
      if (pending.size === 0) running.channel?.unref();
    }) as Promise<CompileResult>;
  }

  return {
    compile,
    /**
     * Starts the child and has it load esbuild, TypeScript and the `lib` declarations now, so
     * that the first real compile does not pay for them. Failures are left to that compile.
     */
    warm(): void {
      compile(WARM_SOURCE).catch(() => undefined);
    },
    async close(): Promise<void> {
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
