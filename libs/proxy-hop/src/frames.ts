import type { Bus } from '@latchkey/bus';

/*
 * The `proxy.request` wire, which both ends speak: the proxy client here, the proxy service's
 * replicas there. Under load a gateway has many calls to hand over in one turn of its event
 * loop, and a replica many answers; each NATS message costs a wake-up of the server and of the
 * receiver, and client work on both sides, whatever its size. So one message carries every call
 * (or answer) of a turn, as frames:
 *
 *   call:   u32 call id | u32 meta length | meta (JSON) | u32 body length | body
 *   answer: u32 call id | u8 kind         | u32 meta length | meta (JSON) | u32 body length | body
 *
 * A call message's reply subject is the caller's inbox; answers and keepalives (kind 1, empty)
 * come back there, grouped per turn too. The request id of each call travels in its meta (the
 * NATS headers would be shared by every call of the message).
 */

export const ANSWER = 0;
export const KEEPALIVE = 1;
/**
 * At most this many frames to a message: a burst from one caller still spreads over the queue
 * group's replicas (each message goes to one), while most of the saving is kept.
 */
const FRAMES_PER_MESSAGE = 8;
/** Room left in a message for the protocol line. */
const ENVELOPE_HEADROOM = 4096;

export interface Frame {
  head: Buffer;
  body: Uint8Array;
}

export function callFrame(id: number, meta: string, body: Uint8Array): Frame {
  const metaLength = Buffer.byteLength(meta);
  const head = Buffer.allocUnsafe(12 + metaLength);
  head.writeUInt32BE(id, 0);
  head.writeUInt32BE(metaLength, 4);
  head.write(meta, 8);
  head.writeUInt32BE(body.length, 8 + metaLength);
  return { head, body };
}

export function answerFrame(id: number, kind: number, meta: string, body: Uint8Array): Frame {
  const metaLength = Buffer.byteLength(meta);
  const head = Buffer.allocUnsafe(13 + metaLength);
  head.writeUInt32BE(id, 0);
  head.writeUInt8(kind, 4);
  head.writeUInt32BE(metaLength, 5);
  head.write(meta, 9);
  head.writeUInt32BE(body.length, 9 + metaLength);
  return { head, body };
}

/** The call id of a frame made by `callFrame` or `answerFrame`. */
export function frameId(frame: Frame): number {
  return frame.head.readUInt32BE(0);
}

/** Reads frames until the data ends; a frame that overruns it ends the reading. */
export function* readFrames(data: Uint8Array, withKind: boolean): Generator<{ id: number; kind: number; meta: string; body: Uint8Array }> {
  const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let at = 0;
  const fixed = withKind ? 13 : 12;
  while (at + fixed <= view.length) {
    const id = view.readUInt32BE(at);
    const kind = withKind ? view.readUInt8(at + 4) : ANSWER;
    const metaAt = at + (withKind ? 9 : 8);
    const metaEnd = metaAt + view.readUInt32BE(metaAt - 4);
    if (metaEnd + 4 > view.length) return;
    const bodyEnd = metaEnd + 4 + view.readUInt32BE(metaEnd);
    if (bodyEnd > view.length) return;
    yield { id, kind, meta: view.toString('utf8', metaAt, metaEnd), body: data.subarray(metaEnd + 4, bodyEnd) };
    at = bodyEnd;
  }
}

export interface FrameBatcher {
  /** Queues a frame for `subject`; the first of a turn schedules the send at the turn's end. */
  queue(subject: string, reply: string | undefined, frame: Frame): void;
  /** Sends what is queued now (before a drain, say). */
  flush(): void;
}

/**
 * Frames queued during one turn, sent at its end in as few messages as the payload limit and
 * `FRAMES_PER_MESSAGE` allow; `onError` hears of the frames of a message that could not be sent.
 */
export function frameBatcher(bus: Pick<Bus, 'publishRaw' | 'maxPayload'>, onError: (frames: Frame[], subject: string, error: unknown) => void): FrameBatcher {
  let queued = new Map<string, { reply: string | undefined; frames: Frame[] }>();
  const send = (subject: string, reply: string | undefined, frames: Frame[]) => {
    let size = 0;
    for (const frame of frames) size += frame.head.length + frame.body.length;
    const data = Buffer.allocUnsafe(size);
    let at = 0;
    for (const frame of frames) {
      at += frame.head.copy(data, at);
      data.set(frame.body, at);
      at += frame.body.length;
    }
    try {
      bus.publishRaw(subject, data, reply);
    } catch (error) {
      onError(frames, subject, error);
    }
  };
  const flush = () => {
    const batches = queued;
    queued = new Map();
    const limit = bus.maxPayload - ENVELOPE_HEADROOM;
    for (const [subject, { reply, frames }] of batches) {
      let start = 0;
      let size = 0;
      frames.forEach((frame, index) => {
        const frameSize = frame.head.length + frame.body.length;
        if (index > start && (size + frameSize > limit || index - start === FRAMES_PER_MESSAGE)) {
          send(subject, reply, frames.slice(start, index));
          start = index;
          size = 0;
        }
        size += frameSize;
      });
      send(subject, reply, start === 0 ? frames : frames.slice(start));
    }
  };
  return {
    queue(subject, reply, frame) {
      if (queued.size === 0) setImmediate(flush);
      const batch = queued.get(subject);
      if (batch) batch.frames.push(frame);
      else queued.set(subject, { reply, frames: [frame] });
    },
    flush,
  };
}
