import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';

// The composition root: config, then connections, then handlers. The service's own subjects
// arrive with the issues that build its work; until then it starts, answers
// `proxy.ping` and reports ready.
await runService({
  service: 'proxy',
  config: loadServiceConfig(),
  start: async () => {},
});
