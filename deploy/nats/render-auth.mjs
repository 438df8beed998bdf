// Writes deploy/nats/auth.conf and the chart's copy from libs/contracts (run after `tsc -b`):
//   npm run nats-auth
// deploy/deploy.test.ts fails while either file differs from what the contracts generate.
import { writeFileSync } from 'node:fs';
import { renderNatsAuthorization } from '../../libs/contracts/dist/index.js';

const text = renderNatsAuthorization();
for (const target of ['auth.conf', '../helm/latchkey/files/nats-auth.conf']) {
  writeFileSync(new URL(target, import.meta.url), text);
}
