import { defineAction } from '@latchkey/functions';

/** A tool whose output is over the 10 MB limit. */
export default defineAction({
  name: 'huge',
  exec: () => ({ text: 'x'.repeat(11 * 1024 * 1024) }),
});
