import { AppError } from '@latchkey/errors';
import type { ProxyResponse } from '@latchkey/proxy-hop';

/** The bytes of provider answers one replica reads for `ctx.proxy` at once, all runs together. */
export const MAX_REPLICA_ANSWER_BYTES = 96 * 1024 * 1024;

export interface AnswerBudget {
  /**
   * Reads an answer's whole body, each chunk charged to the replica's budget as it comes, and
   * hands it to `use`; the charge is given back once `use` returns. A body larger than
   * `maxBytes` fails with `payload_too_large`; one the budget cannot hold now fails with 503
   * `service_unavailable` (retryable), and what was read of it is dropped at once.
   */
  read<T>(answer: Pick<ProxyResponse, 'inline' | 'chunks'>, maxBytes: number, use: (body: Buffer) => T | Promise<T>): Promise<T>;
  /** Bytes charged now (for tests and metrics). */
  held(): number;
}

/**
 * A budget for the provider answers `ctx.proxy` reads into the runner's own memory, outside any
 * isolate's limit: each run may have 64 calls out, and an answer may be 25 MB, so without a
 * budget a few runs firing calls at a large endpoint would hold gigabytes in one replica.
 */
export function createAnswerBudget(maxBytes = MAX_REPLICA_ANSWER_BYTES): AnswerBudget {
  let held = 0;
  return {
    held: () => held,
    async read(answer, maxAnswerBytes, use) {
      let charged = 0;
      const charge = (size: number) => {
        if (charged + size > maxAnswerBytes) throw new AppError('payload_too_large', `The body is larger than ${maxAnswerBytes} bytes`);
        if (held + size > maxBytes) {
          throw new AppError('service_unavailable', 'ctx.proxy: this action-runner holds too many provider answers at once; try again');
        }
        held += size;
        charged += size;
      };
      try {
        if (answer.inline) {
          charge(answer.inline.length);
          return await use(Buffer.from(answer.inline));
        }
        const chunks: Uint8Array[] = [];
        // Leaving the loop early (a throw) stops the stream: the replica drops the upstream answer.
        for await (const chunk of answer.chunks()) {
          charge(chunk.length);
          chunks.push(chunk);
        }
        const body = Buffer.concat(chunks, charged);
        // The chunks go now: `use` turns the body into text, and the two copies are enough.
        chunks.length = 0;
        return await use(body);
      } finally {
        held -= charged;
      }
    },
  };
}
