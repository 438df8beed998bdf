import { defineRoute } from '../../http/define-route.js';
import { pageStart, sendHtmlPage } from '../../http/html-page.js';

/**
 * `GET /docs`: the API reference rendered by Swagger UI, whose files the gateway serves itself
 * (`/docs/{asset}`): the page makes no request but to this origin, and runs no inline script.
 */
const PAGE = `${pageStart('Latchkey API reference')}
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body><div id="reference"></div>
<script src="/docs/swagger-ui-bundle.js"></script><script src="/docs/reference.js"></script></body></html>`;

export const getReferencePage = defineRoute({
  method: 'get',
  path: '/docs',
  auth: 'public',
  scope: null,
  schemas: {},
  doc: { summary: 'This reference as a page', contentType: 'text/html' },
  handler: async ({ res }) => {
    sendHtmlPage(res, () => PAGE, { stylesheets: 'self' });
    return { streamed: true };
  },
});
