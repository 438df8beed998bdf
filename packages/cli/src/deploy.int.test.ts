import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DeployError, deployDirectory } from './deploy.js';

/**
 * Deploys against a real server on loopback standing in for what may answer in front of
 * Latchkey: an ingress or load balancer refusing the upload with its own HTML page.
 */
const dir = mkdtempSync(join(tmpdir(), 'latchkey-deploy-'));
mkdirSync(join(dir, 'example'));
// No import, so the bundle resolves nothing from a project that this folder is not.
writeFileSync(join(dir, 'example', 'hello.ts'), `export default { kind: 'action', name: 'hello', exec: () => 'hi' };\n`);

const PAGE = `<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n${'<center><h1>413 Request Entity Too Large</h1></center>\r\n'.repeat(100)}<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`;

let ingress: Server;
let host: string;

beforeAll(async () => {
  ingress = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(413, { 'content-type': 'text/html' });
      res.end(PAGE);
    });
  });
  ingress.listen(0, '127.0.0.1');
  await once(ingress, 'listening');
  host = `http://127.0.0.1:${(ingress.address() as AddressInfo).port}`;
});

afterAll(() => {
  ingress.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('deployDirectory', () => {
  it('reports an answer that is not JSON by its HTTP status and a short piece of it', async () => {
    const error = await deployDirectory({ dir, host, apiKey: 'sk-canary-5d0c2e' }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(DeployError);
    const { message } = error as DeployError;
    expect(message).toContain('413');
    expect(message).toContain('Request Entity Too Large');
    expect(message.length).toBeLessThan(400);
    expect(message).not.toContain('sk-canary-5d0c2e');
  });

  it('names a missing folder as the mistake it is, rather than failing with a file-system error', async () => {
    const missing = join(dir, 'no-such-folder');
    await expect(deployDirectory({ dir: missing, host, apiKey: 'sk-canary-5d0c2e' })).rejects.toThrow(new DeployError(`no directory ${missing}: expected <dir>/<integration>/<function>.ts`));
  });
});
