import { defineAction } from '@latchkey/functions';
import { z } from 'zod';

/** A tool with a described input: MCP clients see its JSON Schema. */
export default defineAction({
  name: 'double',
  description: 'Doubles a whole number',
  input: z.object({ n: z.number().int() }),
  exec: (_ctx, input) => ({ doubled: input.n * 2 }),
});
