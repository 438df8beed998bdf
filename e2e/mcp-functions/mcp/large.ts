import { defineAction } from '@latchkey/functions';

/** A tool whose output is under the action limit (10 MB) but over what one MCP answer carries. */
export default defineAction({
  name: 'large',
  exec: () => ({ text: 'x'.repeat(2 * 1024 * 1024) }),
});
