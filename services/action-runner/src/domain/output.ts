import { serveBytes } from '@latchkey/bus';
import type { ActionOutput } from '@latchkey/contracts';
import type { NatsConnection } from 'nats';

/** Outputs up to this size travel inside the NATS reply; larger ones as a pull stream. */
const INLINE_OUTPUT_BYTES = 512 * 1024;

/** An action's output (JSON text; `null` when it returned nothing) ready to send back. */
export function outputForReply(nc: NatsConnection, json: string | undefined | null, idleTimeoutMs: number): ActionOutput {
  const text = json ?? 'null';
  const bytes = Buffer.from(text);
  if (bytes.length <= INLINE_OUTPUT_BYTES) return { inline: text };
  const { inbox } = serveBytes(nc, bytes, { idleTimeoutMs });
  return { stream: inbox, bytes: bytes.length };
}
