import { defineAction } from '@latchkey/functions';

/** A tool whose action throws. */
export default defineAction({
  name: 'fail',
  exec: () => {
    throw new Error('the upstream said no');
  },
});
