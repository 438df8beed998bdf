import { serveBytes, type Bus } from '@latchkey/bus';
import type { ActionOutput } from '@latchkey/contracts';

/**
 * An action's output (JSON text; `null` when it returned nothing) ready to send back: inside the
 * reply up to the bus's inline limit, else as a pull stream.
 */
export function outputForReply(bus: Bus, json: string | undefined | null, idleTimeoutMs: number): ActionOutput {
  const text = json ?? 'null';
  const bytes = Buffer.from(text);
  if (bytes.length <= bus.inlineLimit) return { inline: text };
  const { inbox } = serveBytes(bus, bytes, { idleTimeoutMs });
  return { stream: inbox, bytes: bytes.length };
}
