import { parentPort } from 'node:worker_threads';
import { typeCheck } from './type-check.js';

/** Type-checks off the main thread: one request at a time, answered by id. */
parentPort?.on('message', (request: { id: number; source: string; resolveDir: string; filename?: string }) => {
  try {
    parentPort!.postMessage({ id: request.id, diagnostics: typeCheck(request.source, request.resolveDir, request.filename) });
  } catch (error) {
    parentPort!.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) });
  }
});
