import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import { defineRoute } from '../../http/define-route.js';

const require = createRequire(import.meta.url);

/**
 * Starts Swagger UI on `/openapi.json`. A file rather than an inline script, so the page's CSP
 * needs no exception; the online validator badge is off (it would call out to another host).
 */
const START = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#reference', validatorUrl: null, deepLinking: true });\n`;

/** The renderer's files, from the swagger-ui-dist package; nothing else is served here. */
const ASSETS: Record<string, { type: string; read: () => Promise<Buffer | string> }> = {
  'swagger-ui-bundle.js': { type: 'application/javascript', read: () => readFile(require.resolve('swagger-ui-dist/swagger-ui-bundle.js')) },
  'swagger-ui.css': { type: 'text/css', read: () => readFile(require.resolve('swagger-ui-dist/swagger-ui.css')) },
  'reference.js': { type: 'application/javascript', read: async () => START },
};

const loaded = new Map<string, Promise<Buffer | string>>();

export const getReferenceAsset = defineRoute({
  method: 'get',
  path: '/docs/:asset',
  auth: 'public',
  scope: null,
  schemas: { params: z.strictObject({ asset: z.string().max(64) }) },
  doc: { summary: "The reference page's scripts and styles", contentType: 'application/octet-stream', errors: ['not_found'] },
  handler: async ({ params, res }) => {
    const asset = Object.hasOwn(ASSETS, params.asset) ? ASSETS[params.asset] : undefined;
    if (!asset) throw new AppError('not_found', 'No such file');
    let content = loaded.get(params.asset);
    if (!content) {
      content = asset.read();
      loaded.set(params.asset, content);
      // A failed read is retried on the next request, not remembered.
      content.catch(() => loaded.delete(params.asset));
    }
    res.type(asset.type).setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.send(await content);
    return { streamed: true };
  },
});
