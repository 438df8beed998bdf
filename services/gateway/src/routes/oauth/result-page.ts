import { pageStart } from '../../http/html-page.js';

/** Text for HTML: the five characters that matter, escaped. */
const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);

/**
 * The page the provider sends the end user back to. In a popup it reports the outcome to the
 * opener (`{type:'connect', connectionId, providerConfigKey}` or `{type:'error'}`) and closes;
 * opened as a page it says what happened. The outcome is posted only to `targetOrigins` (the
 * origins the flow may have started from, decided by the server): postMessage delivers to the
 * opener only when its origin is the one named, so no other page ever reads it.
 */
export function resultPage(
  outcome: { ok: true; connectionId: string; providerConfigKey: string } | { ok: false; message: string },
  targetOrigins: readonly string[],
  nonce: string,
): string {
  const message = outcome.ok
    ? { type: 'connect', connectionId: outcome.connectionId, providerConfigKey: outcome.providerConfigKey }
    : { type: 'error', error: outcome.message };
  const title = outcome.ok ? 'Connected' : 'Connection failed';
  const text = outcome.ok ? 'You can close this window and return to the application.' : outcome.message;
  // JSON inside a script: `<` escaped so no value can close the tag.
  const payload = JSON.stringify(message).replace(/</g, '\\u003c');
  const targets = JSON.stringify(targetOrigins).replace(/</g, '\\u003c');
  return `${pageStart(title)}
<style>body{font:16px/1.5 system-ui,sans-serif;display:grid;place-items:center;min-height:100vh;margin:0;background:#f6f7f9;color:#1d2433}
main{background:#fff;padding:2rem 2.5rem;border-radius:12px;box-shadow:0 2px 12px #0001;max-width:28rem;text-align:center}
h1{font-size:1.25rem;margin:0 0 .5rem}.hint{color:#667085;font-size:.875rem}.ok{color:#0a7a3d}.fail{color:#b42318}</style></head>
<body><main role="status"><h1 class="${outcome.ok ? 'ok' : 'fail'}">${title}</h1><p>${escapeHtml(text)}</p>${outcome.ok ? '' : '<p class="hint">Close this window and start again from the application.</p>'}</main>
<script nonce="${nonce}">(function(){var m=${payload},t=${targets};if(window.opener){t.forEach(function(o){try{window.opener.postMessage(m,o)}catch(e){}});setTimeout(function(){window.close()},300);}})();</script>
</body></html>`;
}
