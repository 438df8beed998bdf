import { describe, expect, it } from '@jest/globals';
import { createAnswerBudget } from './answer-budget.js';

/** A streamed answer of `count` chunks of `size` bytes, which says whether its reader stopped it early. */
function streamed(count: number, size: number) {
  const state = { stopped: false, sent: 0 };
  return {
    state,
    answer: {
      inline: undefined,
      chunks: async function* () {
        try {
          for (; state.sent < count; state.sent++) yield new Uint8Array(size);
        } finally {
          if (state.sent < count) state.stopped = true;
        }
      },
    },
  };
}

describe('createAnswerBudget', () => {
  it('holds the answers being read within its bytes, all runs together, and frees each once it is used', async () => {
    const budget = createAnswerBudget(1000);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The first answer is read whole and kept while its caller works with it.
    const first = budget.read(streamed(6, 100).answer, 10_000, async (body) => {
      await held;
      return body.length;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(budget.held()).toBe(600);
    // The second would pass the budget: refused, retryable, and its stream stopped early.
    const second = streamed(6, 100);
    await expect(budget.read(second.answer, 10_000, (body) => body.length)).rejects.toMatchObject({ code: 'service_unavailable', retryable: true });
    expect(second.state.stopped).toBe(true);
    expect(budget.held()).toBe(600);
    release();
    await expect(first).resolves.toBe(600);
    expect(budget.held()).toBe(0);
    await expect(budget.read(streamed(6, 100).answer, 10_000, (body) => body.length)).resolves.toBe(600);
  });

  it('refuses an answer larger than the call may read with payload_too_large, inline or streamed', async () => {
    const budget = createAnswerBudget(1000);
    await expect(budget.read({ inline: new Uint8Array(11), chunks: streamed(0, 0).answer.chunks }, 10, (body) => body)).rejects.toMatchObject({ code: 'payload_too_large' });
    await expect(budget.read(streamed(3, 5).answer, 10, (body) => body)).rejects.toMatchObject({ code: 'payload_too_large' });
    expect(budget.held()).toBe(0);
    const body = await budget.read({ inline: new Uint8Array([104, 105]), chunks: streamed(0, 0).answer.chunks }, 10, (bytes) => bytes.toString());
    expect(body).toBe('hi');
  });
});
