import { defineAction } from '@latchkey/functions';
import { z } from 'zod';

/** An action with an input schema: the input is validated before exec runs. */
export default defineAction({
  name: 'double',
  input: z.object({ n: z.number().int() }),
  exec: (_ctx, input) => ({ doubled: input.n * 2 }),
});
