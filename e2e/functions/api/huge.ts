import { defineAction } from '@latchkey/functions';

/** Answers more than the 10 MB an action may. */
export default defineAction({
  name: 'huge',
  exec: () => ({ blob: 'x'.repeat(11 * 1024 * 1024) }),
});
