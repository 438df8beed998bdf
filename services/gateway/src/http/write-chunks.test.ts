import { expect, it } from '@jest/globals';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeChunks } from './write-chunks.js';

it('writes a streamed answer to a slow reader without a listener left behind for each wait', async () => {
  const closeListeners: number[] = [];
  const server = createServer((_req, res) => {
    res.writeHead(200);
    void writeChunks(
      res,
      (async function* () {
        for (let i = 0; i < 64; i++) {
          closeListeners.push(res.listenerCount('close'));
          yield new Uint8Array(256 * 1024);
        }
      })(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const received = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: (server.address() as AddressInfo).port }, (response) => {
        let bytes = 0;
        // A slow reader: the server waits for 'drain' again and again.
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          response.pause();
          setTimeout(() => response.resume(), 1);
        });
        response.on('end', () => resolve(bytes));
        response.on('error', reject);
      })
        .on('error', reject)
        .end();
    });
    expect(received).toBe(64 * 256 * 1024);
    expect(Math.max(...closeListeners)).toBeLessThanOrEqual(closeListeners[0]! + 1);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}, 30_000);
