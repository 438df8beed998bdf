import type { ServerResponse } from 'node:http';

/**
 * Writes a streamed body and ends the response, waiting for the client to drain what it was
 * sent; stops early when the response is gone (the client left).
 */
export async function writeChunks(res: ServerResponse, chunks: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const chunk of chunks) {
    if (res.destroyed) break;
    if (!res.write(chunk)) await drainedOrClosed(res);
  }
  res.end();
}

/** Whichever comes first; the other's listener goes too, so a long answer to a slow client piles none up. */
function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done).off('close', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
  });
}
