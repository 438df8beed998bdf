import { defineAction } from '@latchkey/functions';

/** A tool whose action never ends on its own. */
export default defineAction({
  name: 'spin',
  exec: () => {
    for (;;) {
      // busy until the sandbox's time limit stops it
    }
  },
});
