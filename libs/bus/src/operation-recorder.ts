import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { deflateRaw, inflateRawSync } from 'node:zlib';
import { OPERATION_PAGE_BYTES_MAX, OPERATION_PAGE_ENVIRONMENT, OPERATIONS_PER_BATCH_MAX, operationsContracts, type Operation, type OperationPage, type OperationRecorder } from '@latchkey/contracts';
import { connectionOf } from './bus-connection.js';
import type { Bus } from './create-bus.js';
import type { BusObserver } from './observer.js';

/** Where the log says it dropped operations (once a minute at most). */
export interface OperationLogLogger {
  warn(message: string, meta: Record<string, unknown>): unknown;
}

/** An operation as a service reports it; the recorder gives it its id. */
export type RecordedOperation = Omit<Operation, 'id'>;

export interface OperationRecorderOptions {
  /** Sends one batch of pages; a rejection drops the batch (counted), it is never retried in memory. */
  send: (pages: OperationPage[]) => Promise<void>;
  logger: OperationLogLogger;
  /** Told what was sent and what was dropped, and why (the metrics: the log only warns once a minute). */
  observer?: Pick<BusObserver, 'operationsSent' | 'operationsDropped'>;
  /** A batch leaves this long after its first operation at most. */
  flushMs?: number;
  /** A batch leaves as soon as it holds this many. */
  maxBatch?: number;
  /**
   * A batch leaves as soon as its operations' JSON holds this many bytes of UTF-8 (at most
   * `OPERATION_PAGE_BYTES_MAX`, the bound of one page).
   */
  maxBatchBytes?: number;
  /** Operations held (waiting or being sent) at most; past it new ones are dropped and counted. */
  maxBuffered?: number;
}

export interface OperationRecorderStats {
  /** Operations handed to `send` whose batch was acknowledged. */
  sent: number;
  /** Dropped on arrival: the buffer was full, or the environment id is one no page may hold. */
  dropped: number;
  /** Lost with a batch that could not be sent. */
  failed: number;
}

export interface OperationLog {
  /**
   * Queues an operation; never blocks, never throws, drops (and counts) when the buffer is full.
   * `startedAtMs`, when the caller has it, is `started_at` as a number (spares parsing it again).
   */
  record(operation: RecordedOperation, startedAtMs?: number): void;
  /**
   * `record` for a hot path that writes its operation's JSON itself: `fields` is that JSON
   * object's members, without the braces and without `id` (the recorder adds it). Nothing checks
   * them here; the gateway checks every entry against the service's schema when it reads a page,
   * and leaves out one that fails, so the writer's own tests check its text against that schema.
   */
  recordFields(environmentId: string, startedAtMs: number, fields: string): void;
  stats(): OperationRecorderStats;
  /** Sends what is queued and waits for every batch in flight (at shutdown). */
  flush(): Promise<void>;
}

/** Random per process: two processes never make the same id. */
const PROCESS_TAG = randomBytes(6).toString('base64url');
let sequence = 0;
/** An id's start time and counter, base 36, each of fixed width. */
const TIME_DIGITS = 9;
const COUNTER_DIGITS = 6;

/**
 * A time-ordered, unique id: its start time (base 36, 9 characters: the gateway pages by it),
 * this process's tag and a counter. A batch delivered twice is then stored once.
 */
export function newOperationId(now = Date.now()): string {
  sequence = (sequence + 1) % 36 ** COUNTER_DIGITS;
  const ms = Math.max(0, Math.floor(now));
  // Operations come many to a millisecond: its prefix is written once.
  if (ms !== idPrefixMs) {
    idPrefixMs = ms;
    idPrefix = `${ms.toString(36).padStart(TIME_DIGITS, '0')}${PROCESS_TAG}`;
  }
  return `${idPrefix}${sequence.toString(36).padStart(COUNTER_DIGITS, '0')}`;
}
let idPrefixMs = -1;
let idPrefix = '';

/**
 * `new Date(ms).toISOString()`, with the text up to the second written once per second: an
 * operation's `started_at` on a hot path.
 */
export function isoTime(ms: number): string {
  const whole = Math.floor(ms);
  const second = Math.floor(whole / 1000);
  if (second !== isoSecond || whole < 0) {
    isoSecond = second;
    isoPrefix = new Date(second * 1000).toISOString().slice(0, -4);
  }
  if (whole < 0) return new Date(whole).toISOString();
  return `${isoPrefix}${String(whole - second * 1000).padStart(3, '0')}Z`;
}
let isoSecond = Number.NaN;
let isoPrefix = '';

/**
 * The trace id of a W3C `traceparent` header (`00-<32 hex trace id>-<16 hex span id>-<flags>`),
 * or undefined when absent, malformed or the invalid all-zero id.
 */
export function traceIdOf(traceparent: string | null | undefined): string | undefined {
  if (typeof traceparent !== 'string') return undefined;
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}/.exec(traceparent.trim());
  if (!match?.[1] || /^0+$/.test(match[1])) return undefined;
  return match[1];
}

const deflate = promisify(deflateRaw);

/** The operations of pages as they were recorded (tests and tools; the gateway checks them as it reads). */
export function operationsOfPages(pages: readonly OperationPage[]): Operation[] {
  return pages.flatMap((page) => JSON.parse(inflateRawSync(Buffer.from(page.deflated, 'base64')).toString('utf8')) as Operation[]);
}

/** The room a page starts with: most pages of a quiet environment hold an entry or two. */
const PAGE_START_BYTES = 2 * 1024;

/**
 * A page being filled: its entries' JSON array, written as UTF-8 into memory outside the
 * JavaScript heap as each entry comes. An entry's text is then garbage at once, where a text
 * held for the batch's second would be copied and promoted by the garbage collector, joined
 * again and measured again as the batch leaves.
 */
class PageInProgress {
  /** The lowest id of the page's entries. */
  first_id = '';
  n = 0;
  #bytes = Buffer.allocUnsafe(PAGE_START_BYTES);
  /** Bytes written: `[` and the entries, with the commas between them. */
  #length = 0;

  constructor(readonly environment_id: string) {}

  /**
   * Adds an entry unless it would take the page's UTF-8 past `maxBytes` (`]` included): then it
   * answers false and the entry goes to a new page. An empty page takes any entry. Answers the
   * bytes the entry took. The page's memory doubles as it fills; only written bytes are ever sent.
   */
  add(id: string, text: string, maxBytes: number): number | false {
    // Three bytes of UTF-8 at most for each UTF-16 unit: the room asked before the text is measured.
    const room = text.length * 3 + 2;
    if (this.n > 0 && this.#length + room > maxBytes && this.#length + Buffer.byteLength(text) + 2 > maxBytes) return false;
    if (this.#length + room > this.#bytes.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.#bytes.length * 2, this.#length + room));
      this.#bytes.copy(grown, 0, 0, this.#length);
      this.#bytes = grown;
    }
    this.#bytes[this.#length] = this.n === 0 ? 0x5b /* [ */ : 0x2c; /* , */
    const written = this.#bytes.write(text, this.#length + 1, 'utf8');
    this.#length += written + 1;
    if (this.n === 0 || id < this.first_id) this.first_id = id;
    this.n += 1;
    return written + 1;
  }

  /** The page's JSON array, closed (each `add` left room for the `]`); the page is not written again. */
  close(): Buffer {
    this.#bytes[this.#length] = 0x5d; /* ] */
    return this.#bytes.subarray(0, this.#length + 1);
  }
}

/**
 * Records operations off the hot path: each is written at once as JSON, into the page of its
 * environment and second (UTF-8, outside the JavaScript heap: no object or text of it lives on
 * for the batch's second, which is what the garbage collector pays for); pages leave in
 * batches, deflated (off the event loop), every `flushMs`, or at `maxBatch` operations or
 * `maxBatchBytes` bytes. The buffer is bounded: when the bus is slow or gone, new operations
 * are dropped and counted rather than held without end, and a failed batch is dropped too (the
 * log is an aid, not a ledger; the work itself never waits on it). An operation whose
 * environment id no page may name is dropped and counted alone, so it cannot fail its batch.
 */
export function createOperationLog(options: OperationRecorderOptions): OperationLog {
  // A second: each batch costs a JetStream publish, a deflate, and the gateway and the database
  // an insert, whatever it holds; under load the size bounds send it sooner.
  const flushMs = options.flushMs ?? 1000;
  // As large as a batch may be: each costs the same whatever it holds. Half the page bound keeps
  // a batch of poorly compressing entries well inside a NATS message.
  const maxBatch = Math.min(options.maxBatch ?? OPERATIONS_PER_BATCH_MAX, OPERATIONS_PER_BATCH_MAX);
  const maxBatchBytes = Math.min(options.maxBatchBytes ?? OPERATION_PAGE_BYTES_MAX / 2, OPERATION_PAGE_BYTES_MAX);
  const maxBuffered = options.maxBuffered ?? 10_000;
  /** The pages being filled, by environment and second. */
  let pages = new Map<string, PageInProgress>();
  /** Pages filled to the page bound, waiting with the others for the batch to leave. */
  let full: PageInProgress[] = [];
  /** The page the last operation went to, while it waits (`sendWaiting` forgets it), and its second. */
  let lastPage: PageInProgress | undefined;
  let lastSecond = 0;
  let waiting = 0;
  let waitingBytes = 0;
  let sending = 0;
  let timer: NodeJS.Timeout | undefined;
  const inFlight = new Set<Promise<void>>();
  const stats: OperationRecorderStats = { sent: 0, dropped: 0, failed: 0 };
  const observer = options.observer;
  let lastWarning = 0;

  const warn = (message: string) => {
    // Once a minute at most: a dead bus must not flood the logs either.
    const now = Date.now();
    if (now - lastWarning < 60_000) return;
    lastWarning = now;
    options.logger.warn(message, { ...stats });
  };

  const sendWaiting = () => {
    clearTimeout(timer);
    timer = undefined;
    if (waiting === 0) return;
    const made = [...full, ...pages.values()];
    const count = waiting;
    pages = new Map();
    full = [];
    lastPage = undefined;
    waiting = 0;
    waitingBytes = 0;
    sending += count;
    const task = (async () => {
      try {
        const batch = await Promise.all(
          made.map(async (page) => ({
            environment_id: page.environment_id,
            first_id: page.first_id,
            n: page.n,
            deflated: (await deflate(page.close(), { level: 1 })).toString('base64'),
          })),
        );
        await options.send(batch);
        stats.sent += count;
        observer?.operationsSent(count);
      } catch {
        stats.failed += count;
        observer?.operationsDropped('send_failed', count);
        warn('could not send operations; dropped them');
      } finally {
        sending -= count;
      }
    })();
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
  };

  const recordFields = (environmentId: string, startedAt: number, fields: string) => {
    if (waiting + sending >= maxBuffered) {
      stats.dropped += 1;
      observer?.operationsDropped('buffer_full', 1);
      warn('the operations buffer is full; dropping operations');
      return;
    }
    // A page per environment and second: the id's time prefix names the second. Most operations
    // come in the environment and second of the one before: its page is at hand, its environment
    // id checked already.
    const second = Math.floor(startedAt / 1000);
    const id = newOperationId(startedAt);
    const text = fields === '' ? `{"id":"${id}"}` : `{"id":"${id}",${fields}}`;
    let page = lastPage !== undefined && second === lastSecond && environmentId === lastPage.environment_id ? lastPage : undefined;
    if (page === undefined) {
      if (!OPERATION_PAGE_ENVIRONMENT.test(environmentId)) {
        stats.dropped += 1;
        observer?.operationsDropped('invalid_environment', 1);
        warn('an operation names no environment a page may hold; dropped it');
        return;
      }
      page = pages.get(`${environmentId}:${second}`);
    }
    let added = page === undefined ? false : page.add(id, text, OPERATION_PAGE_BYTES_MAX);
    if (added === false) {
      // A page at its bound waits as it is; the environment's second goes on in a new one, which
      // takes any entry.
      if (page !== undefined) full.push(page);
      page = new PageInProgress(environmentId);
      pages.set(`${environmentId}:${second}`, page);
      added = page.add(id, text, OPERATION_PAGE_BYTES_MAX) as number;
    }
    lastPage = page;
    lastSecond = second;
    waiting += 1;
    waitingBytes += added;
    if (waiting >= maxBatch || waitingBytes >= maxBatchBytes) sendWaiting();
    else if (timer === undefined) {
      timer = setTimeout(sendWaiting, flushMs);
      timer.unref();
    }
  };

  return {
    record(recorded, startedAtMs) {
      // The operation's own `id`, if it came with one, gives way to the recorder's.
      const { id: _given, ...fields } = recorded as RecordedOperation & { id?: unknown };
      recordFields(recorded.environment_id, startedAtMs ?? (Date.parse(recorded.started_at) || Date.now()), JSON.stringify(fields).slice(1, -1));
    },
    recordFields,
    stats: () => ({ ...stats }),
    async flush() {
      sendWaiting();
      await Promise.allSettled([...inFlight]);
    },
  };
}

/**
 * The operation log of one service, sending its batches on its own OPERATIONS subject and telling
 * the bus's observer (the service's metrics) what it sent and dropped.
 */
export function busOperationLog(bus: Bus, logger: OperationLogLogger, service: OperationRecorder, options: Omit<OperationRecorderOptions, 'send' | 'logger'> = {}): OperationLog {
  const contract = operationsContracts[service];
  return createOperationLog({ observer: connectionOf(bus).observer, ...options, logger, send: (pages) => bus.enqueue(contract, { pages }) });
}
