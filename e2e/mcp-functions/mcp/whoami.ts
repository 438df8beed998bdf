import { defineAction } from '@latchkey/functions';

/** A tool without an input schema, answering which connection it ran for. */
export default defineAction({
  name: 'whoami',
  exec: (ctx) => ({ connection: ctx.connectionId, integration: ctx.providerConfigKey }),
});
