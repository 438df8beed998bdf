import { describe, expect, it } from '@jest/globals';
import { resultPage } from './result-page.js';

describe('OAuth result page', () => {
  it('posts only to the origins it is given, from a script carrying the response nonce', () => {
    const page = resultPage({ ok: true, connectionId: 'c1', providerConfigKey: 'github' }, ['https://app.example.com', 'http://127.0.0.1:3003'], 'NONCE123');
    expect(page).toContain('<script nonce="NONCE123">');
    expect(page).toContain('["https://app.example.com","http://127.0.0.1:3003"]');
    expect(page).not.toContain("'*'");
    expect(page).not.toMatch(/postMessage\([^)]*\*/);
  });

  it('cannot be broken out of by a provider message', () => {
    const page = resultPage({ ok: false, message: '</script><script>alert(1)</script>' }, ['https://app.example.com'], 'n');
    expect(page).not.toContain('</script><script>alert(1)');
    expect(page.match(/<script/g)).toHaveLength(1);
  });
});
