import { defineAction } from '@latchkey/functions';
import { z } from 'zod';

/** A tool whose input is a union of objects: its JSON Schema has no root type of its own. */
export default defineAction({
  name: 'area',
  input: z.discriminatedUnion('shape', [
    z.object({ shape: z.literal('square'), side: z.number() }),
    z.object({ shape: z.literal('rectangle'), width: z.number(), height: z.number() }),
  ]),
  exec: (_ctx, input) => ({ area: input.shape === 'square' ? input.side ** 2 : input.width * input.height }),
});
