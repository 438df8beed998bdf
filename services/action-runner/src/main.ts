import { runService } from '@latchkey/runtime';
import { loadServiceConfig } from './config.js';

// The composition root: config, then connections, then handlers. The service's own subjects
// arrive with the issues that build its work; until then it starts, answers
// `action-runner.ping` and reports ready.
await runService({
  service: 'action-runner',
  config: loadServiceConfig(),
  start: async () => {},
});
