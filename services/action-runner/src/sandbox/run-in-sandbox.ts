import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import ivm from 'isolated-vm';
import { createCache } from '@latchkey/cache';
import { AppError, toAppError, type ErrorItem } from '@latchkey/errors';
import { MAX_LOG_FIELDS, MAX_LOG_MESSAGE, PRELUDE, wrapBundle } from './prelude.js';

export interface SandboxLimits {
  /** The isolate's heap limit; past it V8 stops the isolate. */
  memoryMb: number;
  /** Wall clock for the whole run, awaits included. */
  timeoutMs: number;
  /** CPU time the isolate may spend in the run (awaits excluded); unbounded but by the wall clock when absent. */
  cpuTimeMs?: number;
  /** The output's JSON, in bytes. */
  maxOutputBytes: number;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** The context's ways out: each method takes JSON-able arguments and answers JSON-able values. */
export type HostMethods = Record<string, (...args: any[]) => Promise<unknown>>;

export interface SandboxRun {
  bundle: string;
  /** `exec` for actions, syncs and lifecycle functions; `onWebhook` for a sync's webhook handler. */
  entry: 'exec' | 'onWebhook';
  /** The definition kind the caller expects (the run fails on another); any, when absent. */
  kind?: 'action' | 'sync' | 'on-event';
  input?: unknown;
  /** `variant`: a sync run's variant (`ctx.variant`); a sync run without one is `base`. */
  info: { connectionId: string; providerConfigKey: string; dryRun: boolean; variant?: string };
  host: HostMethods;
  /**
   * Keep the loaded isolate after a successful run for the next run with the same key (at most
   * `perKey` idle ones). Module-level state of the bundle then survives between such runs, as
   * in a warm serverless instance; the context object never does.
   */
  reuse?: { key: string; perKey: number };
  onLog: (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;
  limits: SandboxLimits;
  /**
   * Stops the run when aborted (its replica is stopping and hands the work back): the isolate is
   * disposed and the run rejects with the signal's reason.
   */
  signal?: AbortSignal;
}

/** How often a run's CPU time is looked at (so the CPU bound holds to about this). */
const CPU_WATCH_MS = 250;
const LEVELS = new Set(['debug', 'info', 'warn', 'error']);
/**
 * Context calls one isolate may have out at once, and the characters of their arguments: those
 * are copied out of the isolate, past its memory limit, and live on the host until each call
 * answers, so a function firing calls without awaiting them must meet a bound here. The
 * characters allow a largest batch (10,000 records of up to 12 KB) at a time.
 */
const MAX_CALLS_OUT = 64;
const MAX_CALL_CHARS_OUT = 128 * 1024 * 1024;
/**
 * The same bounds across this replica. A run may end with calls still out (its isolate is then
 * disposed), and the next run's fresh isolate starts with a fresh allowance: without these, a
 * function returning at once from calls it never awaited (a slow ctx.post of a large body) would
 * pile up host memory run after run. Four isolates' worth: a run that awaits its calls holds
 * little out, so only several runs sending a largest batch at the same moment meet it, and it is
 * half of what the default eight concurrent runs could hold under the per-isolate bounds alone.
 */
const MAX_REPLICA_CALLS_OUT = 4 * MAX_CALLS_OUT;
const MAX_REPLICA_CALL_CHARS_OUT = 4 * MAX_CALL_CHARS_OUT;
/** Context calls out in this replica, and their characters, until each host call finishes. */
let replicaCallsOut = 0;
let replicaCallCharsOut = 0;

/**
 * Compiled code of recent bundles, so a hot action skips V8's parse. Keyed by the bundle's digest,
 * so never stale: entries leave only when less recently used than 200 others.
 */
const codeCache = createCache<ivm.ExternalCopy<ArrayBuffer>>({ maxEntries: 200 });

async function compileCached(isolate: ivm.Isolate, code: string, filename: string): Promise<ivm.Script> {
  const key = createHash('sha256').update(code).digest('base64url');
  const cachedData = codeCache.get(key);
  const script = (await isolate.compileScript(code, { filename, ...(cachedData ? { cachedData } : { produceCachedData: true }) })) as ivm.Script & {
    cachedData?: ivm.ExternalCopy<ArrayBuffer>;
    cachedDataRejected?: boolean;
  };
  if (!cachedData && script.cachedData) {
    codeCache.set(key, script.cachedData);
  } else if (cachedData && script.cachedDataRejected) {
    codeCache.delete(key);
  }
  return script;
}

/**
 * Runs one function in a fresh V8 isolate (its own heap, no Node APIs) and answers its output as
 * JSON text (undefined when it returned nothing). The isolate is disposed at the end of the
 * run, on its timeout and when it outgrows its memory limit: a runaway run costs its own isolate
 * and nothing else. Errors are AppErrors: the function's own failure (`function_failed`, or the
 * code it set), `function_timed_out`, `function_memory_exceeded`, `action_output_too_large`,
 * `invalid_body` when an action's input fails its schema.
 */
export interface SandboxResult {
  /** The output as JSON text; undefined when the function returned nothing. */
  output: string | undefined;
  /** What the bundle defined. */
  definition: { kind: string; name: string };
}

/**
 * A loaded isolate: the prelude and one bundle evaluated in its context. Only one run uses it
 * at a time; `runId` names that run, and a call or log line from any other (a promise a
 * previous run left behind) is refused, so a run never acts with another run's context.
 */
interface Loaded {
  isolate: ivm.Isolate;
  entry: ivm.Reference<(...args: unknown[]) => Promise<string>>;
  runId: number;
  run: SandboxRun | undefined;
  /**
   * The async context the current run was started in (its request id, trace, and how long its
   * caller waits), for its context calls: isolated-vm calls the host from outside any.
   */
  inRunContext: <R>(work: () => R) => R;
  /** The last outage (a retryable error) a context call of the current run met, if any. */
  outage?: AppError | undefined;
  /** Context calls answering now: a run that ends with one out leaves code to resume in the isolate. */
  pending: number;
  /** The characters of their arguments. */
  pendingChars: number;
  idleTimer?: NodeJS.Timeout;
  /** Its CPU time when it was put aside: an idle isolate computes nothing. */
  parkedCpuNs?: bigint;
  /** What its heap held when it was put aside (counted in `idleBytes`). */
  parkedBytes?: number;
}

/** Idle loaded isolates, by reuse key (environment, integration, function, version). */
const idle = new Map<string, Loaded[]>();
let idleCount = 0;
let nextRunId = 1;
const MAX_IDLE_TOTAL = 64;
/**
 * What idle isolates may hold, module-level data kept by their functions included: an isolate
 * holding more than half its memory limit is not kept, nor one that would take the idle ones past
 * 512 MiB together (four full isolates at the default 128 MB, where 64 could otherwise hold 8 GB).
 */
const MAX_IDLE_SHARE = 0.5;
const MAX_IDLE_BYTES = 512 * 1024 * 1024;
let idleBytes = 0;
/**
 * How long an isolate has to report its heap when its run ends. The report is a task on the
 * isolate's own thread, waited for here (the synchronous one would block this whole process
 * behind code the run left computing); one that does not answer in time is still computing.
 */
const HEAP_REPORT_MS = 250;
const IDLE_MS = 30_000;
/**
 * An idle isolate is looked at this often, and dropped once it has computed more than
 * `IDLE_CPU_NS` since its run: code its run left behind (a callback on a context call's answer)
 * would otherwise go on there, bound by no run's limits, and hold up the next run.
 */
const IDLE_WATCH_MS = 100;
const IDLE_CPU_NS = 5_000_000n;
let idleWatch: NodeJS.Timeout | undefined;

const computedWhileIdle = (loaded: Loaded) => loaded.isolate.isDisposed || loaded.isolate.cpuTime - (loaded.parkedCpuNs ?? 0n) > IDLE_CPU_NS;

function dropIdle(key: string, list: Loaded[], loaded: Loaded): void {
  const at = list.indexOf(loaded);
  if (at >= 0) {
    list.splice(at, 1);
    idleCount--;
    idleBytes -= loaded.parkedBytes ?? 0;
    if (list.length === 0) idle.delete(key);
  }
  clearTimeout(loaded.idleTimer);
  if (!loaded.isolate.isDisposed) loaded.isolate.dispose();
}

function watchIdle(): void {
  if (idleWatch !== undefined) return;
  idleWatch = setInterval(() => {
    for (const [key, list] of idle) for (const loaded of [...list]) if (computedWhileIdle(loaded)) dropIdle(key, list, loaded);
    if (idleCount === 0) {
      clearInterval(idleWatch);
      idleWatch = undefined;
    }
  }, IDLE_WATCH_MS);
  idleWatch.unref();
}

function takeIdle(key: string): Loaded | undefined {
  const list = idle.get(key);
  while (list && list.length > 0) {
    const loaded = list.pop()!;
    idleCount--;
    idleBytes -= loaded.parkedBytes ?? 0;
    clearTimeout(loaded.idleTimer);
    if (list.length === 0) idle.delete(key);
    if (!computedWhileIdle(loaded)) return loaded;
    if (!loaded.isolate.isDisposed) loaded.isolate.dispose();
  }
  return undefined;
}

/** What the isolate holds, in and outside its heap; undefined when it does not say in time. */
async function heldBytes(isolate: ivm.Isolate): Promise<number | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), HEAP_REPORT_MS)));
  try {
    const heap = await Promise.race([isolate.getHeapStatistics(), late]);
    return heap && heap.used_heap_size + heap.externally_allocated_size;
  } catch {
    // Disposed meanwhile.
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

async function keepIdle(key: string, loaded: Loaded, perKey: number, memoryMb: number): Promise<void> {
  const cpuAtEnd = loaded.isolate.isDisposed ? 0n : loaded.isolate.cpuTime;
  const bytes = loaded.isolate.isDisposed ? undefined : await heldBytes(loaded.isolate);
  const list = idle.get(key) ?? [];
  const kept =
    bytes !== undefined &&
    // Code its run left behind that began computing while its heap was read is not kept either.
    !loaded.isolate.isDisposed &&
    loaded.isolate.cpuTime - cpuAtEnd <= IDLE_CPU_NS &&
    bytes <= memoryMb * 1024 * 1024 * MAX_IDLE_SHARE &&
    idleBytes + bytes <= MAX_IDLE_BYTES &&
    list.length < perKey &&
    idleCount < MAX_IDLE_TOTAL;
  if (!kept) {
    if (!loaded.isolate.isDisposed) loaded.isolate.dispose();
    return;
  }
  loaded.run = undefined;
  loaded.parkedCpuNs = loaded.isolate.cpuTime;
  loaded.parkedBytes = bytes;
  idleBytes += bytes;
  loaded.idleTimer = setTimeout(() => dropIdle(key, list, loaded), IDLE_MS);
  loaded.idleTimer.unref();
  list.push(loaded);
  idle.set(key, list);
  idleCount++;
  watchIdle();
}

/** Drops every idle isolate (on shutdown). */
export function disposeIdleIsolates(): void {
  for (const list of idle.values()) {
    for (const loaded of list) {
      clearTimeout(loaded.idleTimer);
      if (!loaded.isolate.isDisposed) loaded.isolate.dispose();
    }
  }
  idle.clear();
  idleCount = 0;
  idleBytes = 0;
  clearInterval(idleWatch);
  idleWatch = undefined;
}

/**
 * A log line's fields as an object, as every reader of the logs takes them (a dry run's reply
 * fails its contract otherwise): any other value (`ctx.log('n', 5)`, a list) is kept under `value`.
 */
function asFields(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
}

/** A context call's arguments; undefined when they are not a JSON array. */
function parseArgs(argsJson: string): unknown[] | undefined {
  try {
    const args: unknown = JSON.parse(argsJson);
    return Array.isArray(args) ? args : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A fresh isolate with the prelude and the bundle evaluated; its references ask `loaded.run`.
 * `started` gets the isolate at once, so the run's limits watch the bundle's own evaluation too.
 */
async function load(bundle: string, limits: SandboxLimits, started: (isolate: ivm.Isolate) => void): Promise<Loaded> {
  const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
  started(isolate);
  const loaded = { isolate, runId: 0, run: undefined, inRunContext: (work: () => unknown) => work(), pending: 0, pendingChars: 0 } as unknown as Loaded;
  try {
    const context = await isolate.createContext();
    const jail = context.global;
    await jail.set('globalThis', jail.derefInto());
    await jail.set(
      '__host',
      new ivm.Reference(async (runId: unknown, method: unknown, argsJson: unknown) => {
        // Refused before anything is parsed or counted: the arguments are dropped at once. The
        // prelude sends a number and two strings; anything else (its code replaced) is not
        // measured at all, as an array's or an object's length says nothing of its size.
        if (typeof runId !== 'number' || typeof method !== 'string' || typeof argsJson !== 'string') {
          return JSON.stringify({ ok: false, error: { code: 'function_failed', message: 'A context call came with arguments that are not text' } });
        }
        const refusal =
          loaded.pending >= MAX_CALLS_OUT
            ? `ctx.${method}: ${MAX_CALLS_OUT} context calls are out already; await some before making more`
            : loaded.pendingChars + argsJson.length > MAX_CALL_CHARS_OUT
              ? `ctx.${method}: the arguments of the context calls out would pass ${MAX_CALL_CHARS_OUT} characters`
              : replicaCallsOut >= MAX_REPLICA_CALLS_OUT || replicaCallCharsOut + argsJson.length > MAX_REPLICA_CALL_CHARS_OUT
                ? `ctx.${method}: this replica has too many context calls out (some left by runs that ended without awaiting them); await some before making more`
                : undefined;
        if (refusal !== undefined) return JSON.stringify({ ok: false, error: { code: 'function_failed', message: refusal } });
        loaded.pending++;
        loaded.pendingChars += argsJson.length;
        replicaCallsOut++;
        replicaCallCharsOut += argsJson.length;
        try {
          const run = loaded.runId === runId ? loaded.run : undefined;
          if (!run) throw new AppError('function_failed', 'This run is over: its context can no longer be used');
          const fn = Object.hasOwn(run.host, method) ? run.host[method] : undefined;
          if (!fn) throw new AppError('function_failed', `ctx.${method} is not available`);
          // Arguments that are not a JSON array are the function's doing (a toJSON it put on
          // arrays): its failure, never an internal error, which would pass for a retryable outage.
          const args = parseArgs(argsJson);
          if (!args) throw new AppError('function_failed', `ctx.${method}: its arguments did not come as a JSON array`);
          const value = await loaded.inRunContext(() => fn(...args));
          return JSON.stringify({ ok: true, value: value ?? null });
        } catch (error) {
          const appError = toAppError(error);
          if (appError.retryable && loaded.runId === runId) loaded.outage = appError;
          // Internal failures keep their detail in our logs; the function sees the code only.
          const message = appError.code === 'internal_error' ? 'An internal error occurred' : appError.message;
          return JSON.stringify({ ok: false, error: { code: appError.code, message } });
        } finally {
          // Released when the host's work ends, not with the run or its isolate.
          loaded.pending--;
          loaded.pendingChars -= argsJson.length;
          replicaCallsOut--;
          replicaCallCharsOut -= argsJson.length;
        }
      }),
    );
    await jail.set(
      '__log',
      new ivm.Reference((runId: unknown, level: unknown, message: unknown, fieldsJson: unknown) => {
        // A line whose parts are not what the prelude sends is dropped before it is measured.
        if (typeof runId !== 'number' || typeof level !== 'string' || typeof message !== 'string') return;
        if (fieldsJson !== undefined && typeof fieldsJson !== 'string') return;
        const run = loaded.runId === runId ? loaded.run : undefined;
        if (!run) return;
        let fields: Record<string, unknown> | undefined;
        try {
          if (fieldsJson !== undefined && fieldsJson.length > MAX_LOG_FIELDS) fields = { truncated: `${fieldsJson.length} characters of fields, over ${MAX_LOG_FIELDS}` };
          else if (fieldsJson !== undefined) fields = asFields(JSON.parse(fieldsJson));
        } catch {
          fields = undefined;
        }
        run.onLog(LEVELS.has(level) ? (level as LogLevel) : 'info', message.slice(0, MAX_LOG_MESSAGE), fields);
      }),
    );
    await (await compileCached(isolate, PRELUDE, 'latchkey:prelude.js')).run(context, { timeout: limits.timeoutMs });
    // The prelude's entry, taken and hidden before the bundle runs: a bundle that could replace it
    // would answer for the run itself, past the prelude's checks of its kind and output.
    loaded.entry = (await jail.get('__run', { reference: true })) as Loaded['entry'];
    await jail.delete('__run');
    await (await compileCached(isolate, wrapBundle(bundle), 'function.js')).run(context, { timeout: limits.timeoutMs });
    return loaded;
  } catch (error) {
    if (!isolate.isDisposed) isolate.dispose();
    throw error;
  }
}

export async function runInSandbox(run: SandboxRun): Promise<SandboxResult> {
  const { limits } = run;
  let loaded: Loaded | undefined;
  /** The isolate this run uses, from the moment it is made or taken: what the limits stop. */
  let isolate: ivm.Isolate | undefined;
  let timer: NodeJS.Timeout | undefined;
  let cpuWatch: NodeJS.Timeout | undefined;
  // What the isolate's CPU clock read when this run took it: this run's share is what it adds.
  let cpuStartNs = 0n;
  let timedOut = false;
  let succeeded = false;
  const { signal } = run;
  const stopped = () => (signal?.reason instanceof AppError ? signal.reason : new AppError('service_unavailable', 'The run was stopped'));
  let onAbort: (() => void) | undefined;
  try {
    if (signal?.aborted) throw stopped();
    const deadline = new Promise<never>((_, reject) => {
      onAbort = () => {
        if (isolate && !isolate.isDisposed) isolate.dispose();
        reject(stopped());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(() => {
        timedOut = true;
        // Stops the isolate's thread wherever it is, even inside an endless loop.
        if (isolate && !isolate.isDisposed) isolate.dispose();
        reject(new AppError('function_timed_out', `The function did not finish within ${limits.timeoutMs} ms`));
      }, limits.timeoutMs);
      const cpuTimeMs = limits.cpuTimeMs;
      if (cpuTimeMs !== undefined) {
        cpuWatch = setInterval(() => {
          if (!isolate || isolate.isDisposed) return;
          if (isolate.cpuTime - cpuStartNs <= BigInt(cpuTimeMs) * 1_000_000n) return;
          timedOut = true;
          isolate.dispose();
          reject(new AppError('function_timed_out', `The function computed for more than ${cpuTimeMs} ms of CPU time`));
        }, CPU_WATCH_MS);
      }
    });
    const execute = async () => {
      const warm = run.reuse ? takeIdle(run.reuse.key) : undefined;
      // A warm isolate's clock counts its earlier runs; a fresh one's, this run's loading.
      if (warm) {
        isolate = warm.isolate;
        cpuStartNs = isolate.cpuTime;
      }
      loaded = warm ?? (await load(run.bundle, limits, (made) => (isolate = made)));
      if (signal?.aborted) throw stopped();
      if (timedOut) throw new AppError('function_timed_out', `The function did not finish within ${limits.timeoutMs} ms`);
      const runId = nextRunId++;
      loaded.runId = runId;
      loaded.run = run;
      loaded.inRunContext = AsyncLocalStorage.snapshot();
      loaded.outage = undefined;
      const inputJson = run.input === undefined ? undefined : JSON.stringify(run.input);
      const info = JSON.stringify({ ...run.info, runId, ...(run.kind ? { kind: run.kind } : {}) });
      return (await loaded.entry.apply(undefined, [run.entry, inputJson, info, limits.maxOutputBytes], {
        arguments: { copy: true },
        result: { promise: true, copy: true },
        timeout: limits.timeoutMs,
      })) as string;
    };
    const replyText = await Promise.race([execute(), deadline]);
    const reply = JSON.parse(replyText) as
      | { ok: true; output?: string; kind: string; name: string }
      | { ok: false; error: SandboxError };
    // A failure that is an outage a context call met and the function let through is that
    // outage, retryable (a sync run is tried again), not the function's own failure.
    if (!reply.ok) {
      const outage = (loaded as Loaded | undefined)?.outage;
      throw outage?.code === reply.error.code ? outage : functionError(reply.error);
    }
    if (reply.output !== undefined && Buffer.byteLength(reply.output) > limits.maxOutputBytes) {
      throw new AppError('action_output_too_large', `The output is larger than ${limits.maxOutputBytes} bytes`);
    }
    succeeded = true;
    return { output: reply.output, definition: { kind: reply.kind, name: reply.name } };
  } catch (error) {
    if (signal?.aborted) throw stopped();
    if (error instanceof AppError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    if (timedOut || /timed out/i.test(message)) throw new AppError('function_timed_out', `The function did not finish within ${limits.timeoutMs} ms`);
    const disposed = (loaded as Loaded | undefined)?.isolate.isDisposed ?? false;
    if (/memory limit/i.test(message) || disposed) {
      throw new AppError('function_memory_exceeded', `The function used more than its ${limits.memoryMb} MB of memory`);
    }
    // Anything else was thrown while loading the bundle (a syntax error, a missing `require`…).
    throw new AppError('function_failed', message.slice(0, MAX_LOG_MESSAGE));
  } finally {
    clearTimeout(timer);
    clearInterval(cpuWatch);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    const used = loaded as Loaded | undefined;
    if (used) {
      used.runId = 0;
      used.run = undefined;
      used.outage = undefined;
      // Only an isolate whose run ended well, with no context call still out, is used again.
      if (succeeded && run.reuse && used.pending === 0) await keepIdle(run.reuse.key, used, run.reuse.perKey, limits.memoryMb);
      else if (!used.isolate.isDisposed) used.isolate.dispose();
    }
  }
}

/** A failure as the prelude reports it; `input` only when its own check of the input failed. */
interface SandboxError {
  code: string;
  message: string;
  issues?: Array<{ message: string; path: string }>;
  input?: boolean;
}

/**
 * The function's own failure, as it reported it; codes it may not claim become `function_failed`
 * (with the code in the payload), and the message says what went wrong, such as the provider's
 * status. Only the input check is reported as bad input.
 */
function functionError(error: SandboxError): AppError {
  const message = String(error.message).slice(0, MAX_LOG_MESSAGE);
  if (error.code === 'invalid_body' && error.input === true) {
    const errors: ErrorItem[] = (error.issues ?? []).map((issue) => ({ code: 'invalid_value', message: issue.message, path: issue.path ? `input.${issue.path}` : 'input' }));
    return new AppError('invalid_body', 'The input does not match the action\'s schema', { errors });
  }
  if (error.code === 'action_output_too_large') return new AppError('action_output_too_large', message);
  if (error.code === 'function_memory_exceeded') return new AppError('function_memory_exceeded', `The function's memory ran out: ${message}`);
  return new AppError('function_failed', message, { payload: error.code && error.code !== 'function_failed' ? { code: error.code } : {} });
}
