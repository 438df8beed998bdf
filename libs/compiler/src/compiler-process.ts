import { compileSource } from './compile-source.js';

/**
 * The compiler's child process (see `createCompiler`): started with an empty environment, it
 * answers one message per request, by id, over the IPC channel.
 */
process.on('message', (request: { id: number; source: string; filename?: string }) => {
  compileSource(request.source, request.filename).then(
    (result) => process.send?.({ id: request.id, result }),
    (error: unknown) => process.send?.({ id: request.id, error: error instanceof Error ? error.message : String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));
