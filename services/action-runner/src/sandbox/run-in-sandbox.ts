import { createHash } from 'node:crypto';
import ivm from 'isolated-vm';
import { AppError, toAppError, type ErrorItem } from '@latchkey/errors';
import { PRELUDE, wrapBundle } from './prelude.js';

export interface SandboxLimits {
  /** The isolate's heap limit; past it V8 stops the isolate. */
  memoryMb: number;
  /** Wall clock for the whole run, awaits included. */
  timeoutMs: number;
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
  info: { connectionId: string; providerConfigKey: string; dryRun: boolean };
  host: HostMethods;
  onLog: (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;
  limits: SandboxLimits;
}

const MAX_LOG_MESSAGE = 4096;
const LEVELS = new Set(['debug', 'info', 'warn', 'error']);

/** Compiled code of recent bundles, so a hot action skips V8's parse. Keyed by the bundle's digest. */
const codeCache = new Map<string, ivm.ExternalCopy<ArrayBuffer>>();
const CODE_CACHE_ENTRIES = 200;

async function compileCached(isolate: ivm.Isolate, code: string, filename: string): Promise<ivm.Script> {
  const key = createHash('sha256').update(code).digest('base64url');
  const cachedData = codeCache.get(key);
  const script = (await isolate.compileScript(code, { filename, ...(cachedData ? { cachedData } : { produceCachedData: true }) })) as ivm.Script & {
    cachedData?: ivm.ExternalCopy<ArrayBuffer>;
    cachedDataRejected?: boolean;
  };
  if (!cachedData && script.cachedData) {
    if (codeCache.size >= CODE_CACHE_ENTRIES) codeCache.delete(codeCache.keys().next().value!);
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

export async function runInSandbox(run: SandboxRun): Promise<SandboxResult> {
  const { limits } = run;
  const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  try {
    const context = await isolate.createContext();
    const jail = context.global;
    await jail.set('globalThis', jail.derefInto());
    await jail.set(
      '__host',
      new ivm.Reference(async (method: string, argsJson: string) => {
        try {
          const fn = Object.hasOwn(run.host, method) ? run.host[method] : undefined;
          if (!fn) throw new AppError('function_failed', `ctx.${method} is not available`);
          const value = await fn(...(JSON.parse(argsJson) as unknown[]));
          return JSON.stringify({ ok: true, value: value ?? null });
        } catch (error) {
          const appError = toAppError(error);
          // Internal failures keep their detail in our logs; the function sees the code only.
          const message = appError.code === 'internal_error' ? 'An internal error occurred' : appError.message;
          return JSON.stringify({ ok: false, error: { code: appError.code, message } });
        }
      }),
    );
    await jail.set(
      '__log',
      new ivm.Reference((level: string, message: string, fieldsJson: string | undefined) => {
        let fields: Record<string, unknown> | undefined;
        try {
          fields = fieldsJson === undefined ? undefined : (JSON.parse(fieldsJson) as Record<string, unknown>);
        } catch {
          fields = undefined;
        }
        run.onLog(LEVELS.has(level) ? (level as LogLevel) : 'info', String(message).slice(0, MAX_LOG_MESSAGE), fields);
      }),
    );
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        // Stops the isolate's thread wherever it is, even inside an endless loop.
        if (!isolate.isDisposed) isolate.dispose();
        reject(new AppError('function_timed_out', `The function did not finish within ${limits.timeoutMs} ms`));
      }, limits.timeoutMs);
    });
    const execute = async () => {
      await (await compileCached(isolate, PRELUDE, 'latchkey:prelude.js')).run(context, { timeout: limits.timeoutMs });
      await (await compileCached(isolate, wrapBundle(run.bundle), 'function.js')).run(context, { timeout: limits.timeoutMs });
      const entry = (await jail.get('__run', { reference: true })) as ivm.Reference<(...args: unknown[]) => Promise<string>>;
      const inputJson = run.input === undefined ? undefined : JSON.stringify(run.input);
      return (await entry.apply(undefined, [run.entry, inputJson, JSON.stringify({ ...run.info, ...(run.kind ? { kind: run.kind } : {}) }), limits.maxOutputBytes], {
        arguments: { copy: true },
        result: { promise: true, copy: true },
        timeout: limits.timeoutMs,
      })) as string;
    };
    const replyText = await Promise.race([execute(), deadline]);
    const reply = JSON.parse(replyText) as
      | { ok: true; output?: string; kind: string; name: string }
      | { ok: false; error: { code: string; message: string; issues?: Array<{ message: string; path: string }> } };
    if (!reply.ok) throw functionError(reply.error);
    if (reply.output !== undefined && Buffer.byteLength(reply.output) > limits.maxOutputBytes) {
      throw new AppError('action_output_too_large', `The output is larger than ${limits.maxOutputBytes} bytes`);
    }
    return { output: reply.output, definition: { kind: reply.kind, name: reply.name } };
  } catch (error) {
    if (error instanceof AppError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    if (timedOut || /timed out/i.test(message)) throw new AppError('function_timed_out', `The function did not finish within ${limits.timeoutMs} ms`);
    if (/memory limit/i.test(message) || isolate.isDisposed) {
      throw new AppError('function_memory_exceeded', `The function used more than its ${limits.memoryMb} MB of memory`);
    }
    // Anything else was thrown while loading the bundle (a syntax error, a missing `require`…).
    throw new AppError('function_failed', message.slice(0, MAX_LOG_MESSAGE));
  } finally {
    clearTimeout(timer);
    if (!isolate.isDisposed) isolate.dispose();
  }
}

/** The function's own failure, as it reported it; codes it may not claim become `function_failed`. */
function functionError(error: { code: string; message: string; issues?: Array<{ message: string; path: string }> }): AppError {
  const message = String(error.message).slice(0, MAX_LOG_MESSAGE);
  if (error.code === 'invalid_body') {
    const errors: ErrorItem[] = (error.issues ?? []).map((issue) => ({ code: 'invalid_value', message: issue.message, path: issue.path ? `input.${issue.path}` : 'input' }));
    return new AppError('invalid_body', 'The input does not match the action\'s schema', { errors });
  }
  if (error.code === 'action_output_too_large') return new AppError('action_output_too_large', message);
  return new AppError('function_failed', message, { payload: error.code && error.code !== 'function_failed' ? { code: error.code } : {} });
}
