import { z } from 'zod';
import { AppError } from '@latchkey/errors';
import { PROVIDER_NAME } from '../../domain/provider-logos.js';
import { defineRoute } from '../../http/define-route.js';

/**
 * `GET /logos/{provider}.svg`: every catalog provider's logo (`logo_url` and an integration's
 * `logo` point here), public like any image. An SVG may carry script: this one never runs any.
 */
export const getProviderLogo = defineRoute({
  method: 'get',
  path: '/logos/:file',
  auth: 'public',
  scope: null,
  doc: { summary: "A provider's logo ({provider}.svg)", contentType: 'image/svg+xml', errors: ['not_found'] },
  schemas: { params: z.strictObject({ file: z.string().max(110) }) },
  handler: async ({ deps, params, res }) => {
    const name = params.file.endsWith('.svg') ? params.file.slice(0, -4) : '';
    if (!PROVIDER_NAME.test(name)) throw new AppError('not_found', 'No such logo');
    res.statusCode = 200;
    res.setHeader('Content-Type', 'image/svg+xml');
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.end(deps.logos.svg(name));
    return { streamed: true };
  },
});
