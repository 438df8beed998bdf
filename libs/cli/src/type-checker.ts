import { Worker } from 'node:worker_threads';
import type { Diagnostic } from './bundle-function.js';

/**
 * Type-checking takes a few hundred milliseconds of CPU: a server runs it on a worker thread so
 * that its event loop keeps answering meanwhile. The worker starts on first use and is kept.
 */
export function createTypeChecker() {
  let worker: Worker | undefined;
  let nextId = 1;
  const pending = new Map<number, { resolve(value: Diagnostic[]): void; reject(error: Error): void }>();

  function start(): Worker {
    const started = new Worker(new URL('./type-check-worker.js', import.meta.url));
    started.unref();
    started.on('message', (reply: { id: number; diagnostics?: Diagnostic[]; error?: string }) => {
      const call = pending.get(reply.id);
      pending.delete(reply.id);
      if (reply.error !== undefined) call?.reject(new Error(reply.error));
      else call?.resolve(reply.diagnostics ?? []);
    });
    const fail = (error: Error) => {
      worker = undefined;
      for (const call of pending.values()) call.reject(error);
      pending.clear();
    };
    started.on('error', fail);
    started.on('exit', (code) => fail(new Error(`the type-check worker exited (${code})`)));
    return started;
  }

  return {
    check(source: string, resolveDir: string, filename?: string): Promise<Diagnostic[]> {
      worker ??= start();
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        worker!.postMessage({ id, source, resolveDir, ...(filename ? { filename } : {}) });
      });
    },
    async close(): Promise<void> {
      await worker?.terminate();
      worker = undefined;
    },
  };
}

export type TypeChecker = ReturnType<typeof createTypeChecker>;
