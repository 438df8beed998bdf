import type { Response } from 'express';
import { pullStream, type Bus } from '@latchkey/bus';
import type { ActionOutput } from '@latchkey/contracts';
import { writeChunks } from '../../http/write-chunks.js';

/** Writes an action's output (JSON text) as the response body, inline or from its pull stream. */
export async function sendOutput(bus: Bus, res: Response, output: ActionOutput, timeoutMs: number): Promise<{ streamed: true }> {
  res.statusCode = 200;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  if ('inline' in output) {
    res.end(output.inline);
    return { streamed: true };
  }
  res.setHeader('content-length', String(output.bytes));
  const stream = pullStream(bus, output.stream, timeoutMs);
  res.once('close', () => void stream.return(undefined));
  await writeChunks(res, stream);
  return { streamed: true };
}
