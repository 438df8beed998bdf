import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openApiText } from './http/openapi-document.js';
import { bareRoutes, routes } from './routes/index.js';

/**
 * `npm run openapi` (part of the build): writes the API reference the gateway serves at
 * `GET /openapi.json` to `docs/openapi.json`, so that it can be read without a running gateway.
 * A unit test fails while the committed file differs from what the routes give.
 */
const target = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));
writeFileSync(target, openApiText(routes, bareRoutes));
process.stdout.write(`wrote ${target}\n`);
