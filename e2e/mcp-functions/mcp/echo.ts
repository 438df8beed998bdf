import { defineAction } from '@latchkey/functions';
import { z } from 'zod';

/** A tool whose input is not an object: MCP lists it wrapped, as `{input: <the string>}`. */
export default defineAction({
  name: 'echo',
  description: 'Answers the text it is given',
  input: z.string().min(1),
  exec: (_ctx, input) => ({ echoed: input }),
});
