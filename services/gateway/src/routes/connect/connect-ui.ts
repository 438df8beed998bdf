import { readFile } from 'node:fs/promises';
import { defineRoute } from '../../http/define-route.js';
import { pageStart, sendHtmlPage } from '../../http/html-page.js';

/** The bundle `npm run build:ui` makes from `connect-ui/app.ts` (esbuild; no CDN, works offline). */
const BUNDLE = new URL('../../connect-ui/app.js', import.meta.url);
let bundle: Promise<Buffer> | undefined;

const PAGE = `${pageStart('Connect an account')}
<style>
*{box-sizing:border-box}body{font:16px/1.5 system-ui,-apple-system,sans-serif;margin:0;background:#f6f7f9;color:#1d2433;display:grid;place-items:center;min-height:100vh;padding:1rem}
main{background:#fff;width:100%;max-width:26rem;padding:1.75rem;border-radius:14px;box-shadow:0 4px 24px #0000001a}
h1{font-size:1.25rem;margin:.25rem 0 .75rem;display:flex;align-items:center;gap:.6rem;outline:none}.ok{color:#0a7a3d}.fail{color:#b42318}
ul.integrations{list-style:none;padding:0;margin:0 0 1rem;display:grid;gap:.5rem}
button{font:inherit;cursor:pointer;border-radius:10px;border:1px solid #d0d5dd;background:#fff;padding:.65rem 1rem}
button[type=submit]{background:#1d4ed8;color:#fff;border-color:#1d4ed8;width:100%;margin-top:.75rem}button:disabled{opacity:.6;cursor:progress}
button.integration{width:100%;display:flex;align-items:center;gap:.75rem;text-align:left}button.integration:hover,button:focus-visible{border-color:#1d4ed8;outline:2px solid #1d4ed833}
button.link{border:none;padding:0;color:#1d4ed8;background:none}button.secondary{width:100%}
.logo{width:28px;height:28px;border-radius:6px;object-fit:contain}.placeholder{display:inline-grid;place-items:center;background:#e0e7ff;color:#1d4ed8;font-weight:600}
label{display:block;font-weight:600;margin-top:.75rem}input{font:inherit;width:100%;padding:.6rem .7rem;border:1px solid #d0d5dd;border-radius:8px;margin-top:.25rem}
input:focus{outline:2px solid #1d4ed8;border-color:#1d4ed8}.error{color:#b42318;min-height:1.5em;margin:.5rem 0 0}
fieldset.optional{border:1px solid #e4e7ec;border-radius:10px;margin:1rem 0 0;padding:.25rem .9rem .9rem}legend{font-weight:600;padding:0 .35rem;color:#475467}
.hint{color:#667085;font-size:.875rem;margin:.25rem 0 0}.intro{color:#475467;margin:0}
</style></head>
<body><main id="app" aria-live="polite"><p>Loading…</p></main><script src="/connect/app.js"></script></body></html>`;

/** The Connect UI's page; the session token stays in the URL and is read by the script. */
export const connectPage = defineRoute({
  method: 'get',
  path: '/connect',
  auth: 'public',
  scope: null,
  doc: { summary: 'The hosted Connect UI page', contentType: 'text/html' },
  raw: true,
  schemas: {},
  handler: async ({ res }) => {
    sendHtmlPage(res, () => PAGE);
    return { streamed: true };
  },
});

export const connectScript = defineRoute({
  method: 'get',
  path: '/connect/app.js',
  auth: 'public',
  scope: null,
  doc: { summary: "The Connect UI's script", contentType: 'application/javascript' },
  schemas: {},
  handler: async ({ res }) => {
    // A missing bundle (the UI was not built) is retried on the next request, not remembered.
    bundle ??= readFile(BUNDLE).catch((error: unknown) => {
      bundle = undefined;
      throw error;
    });
    res.type('application/javascript').setHeader('Cache-Control', 'no-cache');
    res.send(await bundle);
    return { streamed: true };
  },
});
