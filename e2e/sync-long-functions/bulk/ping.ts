import { defineAction } from '@latchkey/functions';

/** A short action beside the long sync: it must find a run slot while syncs hold the others. */
export default defineAction({
  name: 'ping',
  exec: () => ({ pong: true }),
});
