import type { AnyRoute } from '../../http/define-route.js';
import { defineRoute } from '../../http/define-route.js';
import type { OpenApiDocument } from '../../http/openapi-document.js';

/**
 * `GET /openapi.json`: the API reference as OpenAPI 3.1, public like the API document itself.
 * `build` is called once, on the first request, when every route it describes exists.
 */
export function getOpenApiDocument(build: () => OpenApiDocument): AnyRoute {
  let document: string | undefined;
  return defineRoute({
    method: 'get',
    path: '/openapi.json',
    auth: 'public',
    scope: null,
    schemas: {},
    doc: { summary: 'This reference as an OpenAPI 3.1 document', contentType: 'application/json' },
    handler: async ({ res }) => {
      document ??= JSON.stringify(build());
      res.type('application/json').setHeader('Cache-Control', 'no-cache');
      res.send(document);
      return { streamed: true };
    },
  });
}
