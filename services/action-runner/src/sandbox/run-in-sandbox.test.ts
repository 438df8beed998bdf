import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import { currentRequestId, runWithContext } from '@latchkey/logger';
import { runInSandbox, type SandboxRun } from './run-in-sandbox.js';

/** A bundle as esbuild writes it: CommonJS whose default export is the definition. */
const action = (exec: string, extra = '') => `"use strict";${extra}\nmodule.exports = { default: { kind: 'action', name: 'a', exec: ${exec} } };`;

// A generous deadline by default (1.5 s ran out for an input check on a loaded machine): every
// case that means a timeout sets its own.
const limits = { memoryMb: 32, timeoutMs: 10_000, maxOutputBytes: 1024 * 1024 };

async function run(bundle: string, overrides: Partial<SandboxRun> = {}) {
  const result = await runInSandbox({
    bundle,
    entry: 'exec',
    kind: 'action',
    input: { n: 2 },
    info: { connectionId: 'c', providerConfigKey: 'p', dryRun: false },
    host: { getMetadata: async () => ({ plan: 'pro' }) },
    onLog: () => undefined,
    limits,
    ...overrides,
  });
  return result.output;
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected the run to fail');
}

describe('runInSandbox', () => {
  it('runs an action with its input and the context, and collects its logs', async () => {
    const logs: string[] = [];
    const output = await run(action(`async (ctx, input) => { console.log('hello', input.n); const m = await ctx.getMetadata(); return { double: input.n * 2, plan: m.plan, connection: ctx.connectionId }; }`), {
      onLog: (level, message) => logs.push(`${level}:${message}`),
    });
    expect(JSON.parse(output!)).toEqual({ double: 4, plan: 'pro', connection: 'c' });
    expect(logs).toEqual(['info:hello 2']);
  });

  // isolated-vm calls the host from outside any async context: a context call lost its run's
  // request id, trace and its caller's wait (a pre-deletion function's read waited on after
  // the gateway had deleted the connection).
  it('answers context calls in the async context its run was started in', async () => {
    const output = await runWithContext({ requestId: 'req-in-sandbox' }, () =>
      run(action(`async (ctx) => ctx.getMetadata()`), { host: { getMetadata: async () => ({ requestId: currentRequestId() ?? null }) } }),
    );
    expect(JSON.parse(output!)).toEqual({ requestId: 'req-in-sandbox' });
  });

  it('tells a sync the variant it runs for (base when none is given); an action has none', async () => {
    const sync = `"use strict";module.exports = { default: { kind: 'sync', name: 's', exec: async (ctx) => ctx.variant } };`;
    expect(JSON.parse((await run(sync, { kind: 'sync', info: { connectionId: 'c', providerConfigKey: 'p', dryRun: false, variant: 'eu' } }))!)).toBe('eu');
    expect(JSON.parse((await run(sync, { kind: 'sync' }))!)).toBe('base');
    expect(JSON.parse((await run(action(`async (ctx) => ctx.variant === undefined`)))!)).toBe(true);
  });

  it('reports a context call refused for bad arguments as the function failing with that call\'s message, not as bad input', async () => {
    const host = {
      batchSave: async () => {
        throw new AppError('invalid_body', 'ctx.batchSave: records must be an array (the provider answered 500)');
      },
    };
    const error = await failure(run(action(`async (ctx) => { await ctx.batchSave(undefined, 'Ticket'); }`), { host }));
    expect(error.code).toBe('function_failed');
    expect(error.message).toContain('the provider answered 500');
    expect(error.message).not.toContain("input does not match");
    // The input check itself still answers invalid_body.
    const schema = `{ '~standard': { version: 1, vendor: 't', validate: (v) => (typeof v.n === 'string' ? { value: v } : { issues: [{ message: 'n must be text', path: ['n'] }] }) } }`;
    const bad = await failure(run(`"use strict";module.exports = { default: { kind: 'action', name: 'a', input: ${schema}, exec: async () => 1 } };`));
    expect(bad.code).toBe('invalid_body');
    expect(bad.errors).toEqual([{ code: 'invalid_value', message: 'n must be text', path: 'input.n' }]);
  });

  it('fails a run whose context call met an outage it did not catch with that outage (retryable), not as the function failing', async () => {
    const host = {
      batchSave: async () => {
        throw new AppError('service_unavailable', 'The records store did not answer in time');
      },
    };
    const outage = await failure(run(action(`async (ctx) => { await ctx.batchSave([{ id: '1' }], 'Ticket'); }`), { host }));
    expect(outage.code).toBe('service_unavailable');
    expect(outage.retryable).toBe(true);
    // Caught, and a failure of the function's own thrown instead: the function's.
    const own = await failure(run(action(`async (ctx) => { try { await ctx.batchSave([], 'T'); } catch { throw new Error('gave up'); } }`), { host }));
    expect(own.code).toBe('function_failed');
    // A run that met no outage and throws that code itself: the function's failure.
    const next = await failure(run(action(`async () => { const e = new Error('mine'); e.code = 'service_unavailable'; throw e; }`)));
    expect(next.code).toBe('function_failed');
  });

  it('bounds the context calls a run keeps out at once, in number and in size: their arguments live outside its memory limit', async () => {
    let out = 0;
    let peak = 0;
    let charsOut = 0;
    let peakChars = 0;
    const host = {
      setMetadata: async (value: unknown) => {
        const chars = JSON.stringify(value ?? null).length;
        out++;
        charsOut += chars;
        peak = Math.max(peak, out);
        peakChars = Math.max(peakChars, charsOut);
        await new Promise((resolve) => setTimeout(resolve, 250));
        out--;
        charsOut -= chars;
        return null;
      },
    };
    // Three hundred calls left unawaited, each with 128 KB of arguments, where the bound keeps 64
    // out (a thousand of 1 MB each took over 10 s of the isolate's serializing on a loaded
    // machine; what is checked here is the bound, not the speed, and the size bound below).
    const flood = await run(
      action(`async (ctx) => {
        const big = 'x'.repeat(1 << 17);
        const calls = Array.from({ length: 300 }, () => ctx.setMetadata(big).then(() => 'ok', (error) => error.code));
        const settled = await Promise.all(calls);
        return { ok: settled.filter((code) => code === 'ok').length, refused: settled.filter((code) => code === 'function_failed').length };
      }`),
      { host, limits: { ...limits, timeoutMs: 30_000 } },
    );
    const counts = JSON.parse(flood!) as { ok: number; refused: number };
    expect(counts.ok + counts.refused).toBe(300);
    expect(counts.refused).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(64);
    expect(peakChars).toBeLessThanOrEqual(128 * (1 << 20));
    // One call whose arguments alone pass the bound is refused before they are parsed.
    const huge = await failure(run(action(`async (ctx) => { await ctx.setMetadata('x'.repeat(130 << 20)); }`), { host, limits: { ...limits, memoryMb: 512, timeoutMs: 30_000 } }));
    expect(huge.code).toBe('function_failed');
    expect(huge.message).toMatch(/arguments/);
  }, 90_000);

  it('uses the JSON and String it took before the bundle ran, so a bundle that replaces them slips no arguments or log fields past their bounds', async () => {
    const received: unknown[] = [];
    const host = {
      setMetadata: async (value: unknown) => {
        received.push(typeof value === 'string' ? value.slice(0, 16) : value);
        return null;
      },
    };
    // The replacement hands the host an array holding the real JSON of 130 MB of arguments, whose
    // length is 1, and an object whose length is NaN, which would leave the count of characters out NaN.
    const replaced = `const real = JSON.stringify;
      JSON.stringify = (value, ...rest) => {
        if (Array.isArray(value) && value[0] === 'huge') return [real(['x'.repeat(130 << 20)])];
        if (Array.isArray(value) && value[0] === 'nan') return { length: NaN };
        if (value && value.fields) return [real({ big: 'y'.repeat(64 * 1024) })];
        return real(value, ...rest);
      };
      String = () => ({ not: 'text' });`;
    const fields: unknown[] = [];
    const output = await run(
      action(`async (ctx) => {
        ${replaced}
        const codes = [];
        for (const arg of ['huge', 'nan']) codes.push(await ctx.setMetadata(arg).then(() => 'ok', (error) => error.code));
        ctx.log('m', { fields: true });
        // ctx.log then passes its first argument on as the level, a list here: the line is dropped.
        Array.prototype.includes = () => true;
        ctx.log(['debug'], 'dropped');
        return codes;
      }`),
      { host, onLog: (_level, message, logged) => fields.push([message, logged]), limits: { ...limits, memoryMb: 512, timeoutMs: 30_000 } },
    );
    // The host got the arguments the function passed, never the 130 MB its replacement made.
    expect(received).toEqual(['huge', 'nan']);
    expect(fields).toEqual([['m', { fields: true }]]);
    expect(JSON.parse(output!)).toEqual(['ok', 'ok']);
  }, 90_000);

  it('reports a context call whose arguments do not come as a JSON array as the function failing, never as a retryable outage', async () => {
    // The prelude's JSON still calls toJSON, which the bundle may put on every array.
    for (const toJSON of ['() => 5', '() => ({ a: 1 })', '() => "text"']) {
      const error = await failure(run(action(`async (ctx) => { Array.prototype.toJSON = ${toJSON}; await ctx.getMetadata(); }`)));
      expect(error.code).toBe('function_failed');
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/arguments/);
    }
  });

  it('hands log fields over as an object: fields of another shape are kept under value', async () => {
    const logged: unknown[] = [];
    await run(
      action(`async (ctx) => {
        ctx.log('number', 5);
        ctx.log('list', [1, 2]);
        ctx.log('text', { toJSON: () => 'as text' });
        ctx.log('nothing', null);
        ctx.log('warn', 'object', { a: 1 });
        ctx.log('none');
      }`),
      { onLog: (level, message, fields) => logged.push([level, message, fields]) },
    );
    expect(logged).toEqual([
      ['info', 'number', { value: 5 }],
      ['info', 'list', { value: [1, 2] }],
      ['info', 'text', { value: 'as text' }],
      ['info', 'nothing', { value: null }],
      ['warn', 'object', { a: 1 }],
      ['info', 'none', undefined],
    ]);
  });

  it('bounds the context calls out across the replica: calls an ended run left out still count against the next runs', async () => {
    const held: Array<() => void> = [];
    const holding = { setMetadata: () => new Promise((resolve) => held.push(() => resolve(null))), getMetadata: async () => ({}) };
    // Each run leaves its isolate's bound of calls out and ends; its isolate is disposed.
    const leaver = action(`async (ctx) => {
      for (let i = 0; i < 64; i++) ctx.setMetadata(i).catch(() => undefined);
      // Answered once the host has taken the calls before it (refused here: 64 are out).
      await ctx.getMetadata().catch(() => undefined);
      return 'left';
    }`);
    for (let i = 0; i < 5; i++) expect(JSON.parse((await run(leaver, { host: holding }))!)).toBe('left');
    // Some of the bound may be held by calls earlier cases left out (a host that answers in a minute).
    expect(held.length).toBeGreaterThanOrEqual(4 * 64 - 8);
    expect(held.length).toBeLessThanOrEqual(4 * 64);
    const next = action(`async (ctx) => { await ctx.setMetadata('next'); return 'made'; }`);
    const quick = { setMetadata: async () => null };
    const refused = await failure(run(next, { host: quick }));
    expect(refused.code).toBe('function_failed');
    expect(refused.message).toMatch(/replica/);
    // Once they answer, the next run's calls are taken again.
    for (const release of held.splice(0)) release();
    await new Promise((resolve) => setImmediate(resolve));
    expect(JSON.parse((await run(next, { host: quick }))!)).toBe('made');
  });

  it('does not keep an isolate whose module holds much of its memory limit: the next run starts afresh', async () => {
    // Numbers in the heap and an ArrayBuffer outside it, 1 MB of each per `megabytes`.
    const hoarder = (megabytes: number) => `"use strict";let runs = 0; let hoard;
module.exports = { default: { kind: 'action', name: 'a', exec: async () => {
  runs++;
  hoard = hoard || { numbers: new Array(${megabytes} << 17).fill(0.5), buffer: new ArrayBuffer(${megabytes} << 20) };
  return runs;
} } };`;
    // About 20 MB under a 32 MB limit.
    const large = { key: 'hoarder-large', perKey: 1 };
    expect(JSON.parse((await run(hoarder(10), { reuse: large }))!)).toBe(1);
    expect(JSON.parse((await run(hoarder(10), { reuse: large }))!)).toBe(1);
    // About 2 MB is kept.
    const small = { key: 'hoarder-small', perKey: 1 };
    expect(JSON.parse((await run(hoarder(1), { reuse: small }))!)).toBe(1);
    expect(JSON.parse((await run(hoarder(1), { reuse: small }))!)).toBe(2);
  });

  it('runs the prelude\'s entry whatever the bundle puts on the global object: its answer for the run is not taken', async () => {
    const forge = "globalThis.__run = async () => JSON.stringify({ ok: true, output: JSON.stringify('forged'), kind: 'sync', name: 'other' });";
    expect(JSON.parse((await run(action(`async () => typeof globalThis.__run`, forge)))!)).toBe('function');
    expect(JSON.parse((await run(action(`async () => 1`, forge)))!)).toBe(1);
    expect(JSON.parse((await run(action(`async () => typeof globalThis.__run`)))!)).toBe('undefined');
  });

  it('keeps the host\'s references out of the bundle\'s reach', async () => {
    const seen = await run(action(`async () => [typeof host, typeof logRef, typeof hostCall, typeof globalThis.__host]`));
    expect(JSON.parse(seen!)).toEqual(['undefined', 'undefined', 'undefined', 'undefined']);
  });

  it('stops an endless loop at its timeout, and the next run succeeds', async () => {
    const started = Date.now();
    const error = await failure(run(action(`async () => { for (;;) {} }`), { limits: { ...limits, timeoutMs: 300 } }));
    expect(error.code).toBe('function_timed_out');
    expect(Date.now() - started).toBeLessThan(3000);
    // An endless loop after an await (outside the synchronous part) too.
    const later = await failure(run(action(`async (ctx) => { await ctx.getMetadata(); for (;;) {} }`), { limits: { ...limits, timeoutMs: 300 } }));
    expect(later.code).toBe('function_timed_out');
    expect(JSON.parse((await run(action(`async () => 'fine'`)))!)).toBe('fine');
  });

  it('stops a run when its signal aborts, waiting or computing, with the signal\'s reason; an aborted signal runs nothing', async () => {
    const reason = new AppError('service_unavailable', 'This replica is stopping');
    // A context call that does not answer for a minute, then an endless loop.
    const slowHost = { getMetadata: () => new Promise((resolve) => setTimeout(resolve, 60_000).unref()) };
    for (const exec of [`async (ctx) => { await ctx.getMetadata(); }`, `async () => { for (;;) {} }`]) {
      const stopping = new AbortController();
      const started = Date.now();
      setTimeout(() => stopping.abort(reason), 200);
      const error = await failure(run(action(exec), { host: slowHost, signal: stopping.signal, limits: { ...limits, timeoutMs: 20_000 } }));
      expect(error).toBe(reason);
      // Well before the run's 20 s timeout or the host's minute, with room for a loaded machine.
      expect(Date.now() - started).toBeLessThan(10_000);
    }
    let called = false;
    const host = {
      getMetadata: async () => {
        called = true;
        return {};
      },
    };
    expect(await failure(run(action(`async (ctx) => ctx.getMetadata()`), { host, signal: AbortSignal.abort(reason) }))).toBe(reason);
    expect(called).toBe(false);
  });

  it('lets other runs finish while a runaway spins beside them', async () => {
    const runaway = failure(run(action(`async () => { for (;;) {} }`), { limits: { ...limits, timeoutMs: 3000 } }));
    let runawayStopped = false;
    void runaway.then(() => (runawayStopped = true));
    const others = await Promise.all(Array.from({ length: 4 }, (_, i) => run(action(`async (ctx, input) => input.n + ${i}`))));
    expect(others.map((output) => JSON.parse(output!))).toEqual([2, 3, 4, 5]);
    // Done while the runaway still spins: they did not wait for its timeout (no wall-clock bound,
    // which a loaded machine broke).
    expect(runawayStopped).toBe(false);
    expect((await runaway).code).toBe('function_timed_out');
  });

  it('stops a function that allocates without end at its memory limit', async () => {
    const error = await failure(run(action(`async () => { const hoard = []; for (;;) hoard.push(new Array(100000).fill(hoard.length)); }`), { limits: { ...limits, timeoutMs: 20_000 } }));
    expect(error.code).toBe('function_memory_exceeded');
    expect(JSON.parse((await run(action(`async () => 1`)))!)).toBe(1);
  });

  it('parses a proxied JSON answer inside the isolate, under its memory limit; an answer that is not JSON, or asked for as text, stays text', async () => {
    const answers: Record<string, { status: number; headers: Record<string, string>; data: string; parse?: true }> = {
      json: { status: 200, headers: {}, data: '{"items":[{"id":1}]}', parse: true },
      broken: { status: 502, headers: {}, data: '<html>bad gateway</html>', parse: true },
      text: { status: 200, headers: {}, data: '{"items":[]}' },
      // A 12 MB text, many times that in objects once parsed: past a 32 MB isolate.
      large: { status: 200, headers: {}, data: `[${Array.from({ length: 1_500_000 }, () => '{"a":1}').join(',')}]`, parse: true },
    };
    const host = { proxy: async (config: { endpoint: string }) => answers[config.endpoint] };
    const read = (endpoint: string) => run(action(`async (ctx) => ctx.proxy({ endpoint: '${endpoint}' })`), { host });
    expect(JSON.parse((await read('json'))!)).toEqual({ status: 200, headers: {}, data: { items: [{ id: 1 }] } });
    expect(JSON.parse((await read('broken'))!)).toEqual({ status: 502, headers: {}, data: '<html>bad gateway</html>' });
    expect(JSON.parse((await read('text'))!)).toEqual({ status: 200, headers: {}, data: '{"items":[]}' });
    const error = await failure(run(action(`async (ctx) => { const answer = await ctx.proxy({ endpoint: 'large' }); return answer.data.length; }`), { host, limits: { ...limits, timeoutMs: 20_000 } }));
    expect(error.code).toBe('function_memory_exceeded');
  });

  it('ends ctx.paginate when the provider answers with the cursor or link it was just given, instead of asking for that page again and again', async () => {
    const asked: string[] = [];
    const page = (data: unknown, headers: Record<string, string> = {}) => ({ status: 200, headers, data: JSON.stringify(data), parse: true as const });
    const host = {
      paginateSettings: async () => null,
      proxy: async (config: { endpoint: string; params?: Record<string, unknown> }) => {
        asked.push(`${config.endpoint} ${JSON.stringify(config.params ?? {})}`);
        // A cursor that moves once, then comes back the same; a link to the page itself, in the body and in the header.
        if (config.endpoint === '/cursor') return page({ items: [{ id: asked.length }], next: 'c1' });
        if (config.endpoint === '/body-link') return page({ items: [{ id: asked.length }], next: 'https://api.example.com/body-link?page=2' });
        return page([{ id: asked.length }], { link: '<https://api.example.com/header-link?page=2>; rel="next"' });
      },
    };
    const pages = (endpoint: string, paginate: string) =>
      run(action(`async (ctx) => { const seen = []; for await (const page of ctx.paginate({ endpoint: '${endpoint}', paginate: ${paginate} })) seen.push(page); return seen.length; }`), { host });

    expect(JSON.parse((await pages('/cursor', `{ type: 'cursor', response_path: 'items', cursor_path_in_response: 'next' }`))!)).toBe(2);
    expect(asked).toEqual(['/cursor {}', '/cursor {"cursor":"c1"}']);
    asked.length = 0;
    expect(JSON.parse((await pages('/body-link', `{ type: 'link', response_path: 'items', link_path_in_response_body: 'next' }`))!)).toBe(2);
    expect(asked).toEqual(['/body-link {}', '/body-link {"page":"2"}']);
    asked.length = 0;
    expect(JSON.parse((await pages('/header-link', `{ type: 'link' }`))!)).toBe(2);
    expect(asked).toEqual(['/header-link {}', '/header-link {"page":"2"}']);
  });

  it('has no WebAssembly, whose memories would grow outside the memory limit', async () => {
    expect(JSON.parse((await run(action(`async () => typeof WebAssembly`)))!)).toBe('undefined');
    const grow = await failure(run(action(`async () => { const memory = new globalThis.WebAssembly.Memory({ initial: 1, maximum: 65536 }); memory.grow(65535); }`)));
    expect(grow.code).toBe('function_failed');
    expect(JSON.parse((await run(action(`async () => 1`)))!)).toBe(1);
  });

  it('ends an ArrayBuffer or SharedArrayBuffer flood at the memory limit with function_memory_exceeded, allocating no more than the limit', async () => {
    const error = await failure(run(action(`async () => { const hoard = []; for (;;) hoard.push(new ArrayBuffer(4 * 1024 * 1024)); }`)));
    expect(error.code).toBe('function_memory_exceeded');
    // Bounded loops: were the limit not applied, they would stop at 256 MB.
    const shared = await failure(run(action(`async () => { const hoard = []; for (let i = 0; i < 64; i++) hoard.push(new SharedArrayBuffer(4 * 1024 * 1024)); return hoard.length; }`)));
    expect(shared.code).toBe('function_memory_exceeded');
    expect(JSON.parse((await run(action(`async () => 1`)))!)).toBe(1);
  });

  it('offers no process environment, filesystem, module loader or network', async () => {
    expect((await failure(run(action(`async () => process.env.HOME`)))).message).toMatch(/process is not defined/);
    expect((await failure(run(action(`async () => require('node:fs').readFileSync('/etc/passwd', 'utf8')`)))).message).toMatch(/require is not defined/);
    // esbuild leaves Node built-ins as require() calls at the top of the bundle: loading fails.
    expect((await failure(run(action(`async () => net.connect(80, '127.0.0.1')`, `const net = require('node:net');`)))).message).toMatch(/require is not defined/);
    expect((await failure(run(action(`async () => fetch('http://127.0.0.1/')`)))).message).toMatch(/fetch is not defined/);
    expect((await failure(run(action(`async () => import('node:fs')`)))).code).toBe('function_failed');
    // The host's references are gone from the global object once the context is built.
    expect(JSON.parse((await run(action(`async () => [typeof __host, typeof __log, typeof setTimeout]`)))!)).toEqual(['undefined', 'undefined', 'undefined']);
  });

  it('cuts log lines to size in the isolate, before they are copied out: a loop logging its largest string piles nothing up in the runner', async () => {
    const lines: Array<{ message: string; fields: unknown }> = [];
    const before = process.memoryUsage().rss;
    // 60 lines of 16 MB, in their messages and their fields: 960 MB of copies outside the
    // isolate, were they cut in the host, over twice the growth allowed below.
    await run(action(`async (ctx) => { const big = 'x'.repeat(16 * 1024 * 1024); for (let i = 0; i < 30; i++) console.log(big); for (let i = 0; i < 30; i++) ctx.log('fields', { big }); }`), {
      onLog: (_level, message, fields) => void lines.push({ message, fields }),
      // Writing 30 fields of 16 MB as JSON takes the isolate some 3 s, more on a loaded machine.
      limits: { ...limits, memoryMb: 64, timeoutMs: 50_000 },
    });
    expect(process.memoryUsage().rss - before).toBeLessThan(400 * 1024 * 1024);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((line) => line.message.length <= 4096)).toBe(true);
    expect(lines.at(-1)?.fields).toEqual({ truncated: expect.stringContaining('characters of fields') });
  }, 60_000);

  it('caps the output', async () => {
    const error = await failure(run(action(`async () => 'x'.repeat(2 * 1024 * 1024)`), { limits: { ...limits, timeoutMs: 5000 } }));
    expect(error.code).toBe('action_output_too_large');
  });

  it('validates the input against the action schema and reports the function\'s own errors', async () => {
    const schema = `{ '~standard': { validate: (value) => typeof value.n === 'number' ? { value } : { issues: [{ message: 'n must be a number', path: ['n'] }] } } }`;
    const bundle = `"use strict";module.exports = { default: { kind: 'action', name: 'a', input: ${schema}, exec: async (ctx, input) => input.n } };`;
    expect(JSON.parse((await run(bundle))!)).toBe(2);
    const invalid = await failure(run(bundle, { input: { n: 'two' } }));
    expect(invalid.code).toBe('invalid_body');
    expect(invalid.errors).toEqual([{ code: 'invalid_value', message: 'n must be a number', path: 'input.n' }]);
    const thrown = await failure(run(action(`async () => { throw new Error('the provider said no'); }`)));
    expect(thrown).toMatchObject({ code: 'function_failed', message: 'the provider said no' });
    const wrongKind = await failure(run(action(`async () => 1`), { kind: 'on-event' }));
    expect(wrongKind.message).toMatch(/not a on-event/);
  });

  it('reuses a loaded isolate for the same key only, and never with a finished run\'s context', async () => {
    const counter = `"use strict";let runs = 0; let leftover;
module.exports = { default: { kind: 'action', name: 'a', exec: async (ctx) => {
  runs++;
  const previous = leftover;
  leftover = ctx;
  let stale = 'none';
  if (previous) { try { await previous.getMetadata(); stale = 'worked'; } catch (error) { stale = error.message; } }
  return { runs, stale };
} } };`;
    const reuse = { key: 'env\u0000p\u0000action\u0000a\u00001', perKey: 1 };
    expect(JSON.parse((await run(counter, { reuse }))!)).toEqual({ runs: 1, stale: 'none' });
    expect(JSON.parse((await run(counter, { reuse }))!)).toEqual({ runs: 2, stale: 'This run is over: its context can no longer be used' });
    expect(JSON.parse((await run(counter, { reuse: { ...reuse, key: 'another' } }))!)).toEqual({ runs: 1, stale: 'none' });
    // A failed run costs its isolate: the next one starts afresh.
    const flaky = counter.replace('runs++;', 'runs++; if (runs === 2) throw new Error("second");');
    const failing = { ...reuse, key: 'failing' };
    expect(JSON.parse((await run(flaky, { reuse: failing }))!)).toMatchObject({ runs: 1 });
    expect((await failure(run(flaky, { reuse: failing }))).message).toBe('second');
    expect(JSON.parse((await run(flaky, { reuse: failing }))!)).toMatchObject({ runs: 1 });
  });

  it('never hands out, nor leaves computing, a kept isolate whose code went on after its run', async () => {
    // The run returns with a context call out; its answer resumes an endless loop once the run
    // is over: with the call still out at the end (a slow host), and with it answered in the
    // same turn as the run's end (a quick one).
    const spinner = action(`async (ctx) => { ctx.getMetadata().finally(() => { for (;;) {} }); return 1; }`);
    const hosts = {
      slow: { getMetadata: () => new Promise((resolve) => setTimeout(() => resolve({}), 100)) },
      quick: { getMetadata: async () => ({}) },
    };
    for (const [name, host] of Object.entries(hosts)) {
      const reuse = { key: `spinner-${name}`, perKey: 1 };
      expect(JSON.parse((await run(spinner, { reuse, host }))!)).toBe(1);
      // Long enough for the answer to arrive and the loop to start, and for the work earlier cases
      // left this process (disposals, collections) to settle: a loop left running runs on.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const started = process.cpuUsage();
      await new Promise((resolve) => setTimeout(resolve, 500));
      const spent = process.cpuUsage(started);
      // No thread of this process computes on: half a second of CPU would be the loop.
      expect((spent.user + spent.system) / 1000).toBeLessThan(250);
      // The function's next run gets an isolate that answers.
      expect(JSON.parse((await run(action(`async () => 2`), { reuse }))!)).toBe(2);
    }
  });

  it('bounds a sync\'s computing by its CPU time while its bundle loads too', async () => {
    const sync = `"use strict";for (;;) {}\nmodule.exports = { default: { kind: 'sync', name: 's', exec: async () => 1 } };`;
    const error = await failure(run(sync, { kind: 'sync', limits: { ...limits, timeoutMs: 20_000, cpuTimeMs: 300 } }));
    expect(error.code).toBe('function_timed_out');
    expect(error.message).toContain('CPU time');
  });

  it('bounds a long run\'s computing by its CPU time, apart from its wall clock: waiting does not count', async () => {
    const slow = { getMetadata: () => new Promise((resolve) => setTimeout(() => resolve({}), 800)) };
    // Waits 800 ms on the host with 300 ms of CPU allowed: the wait costs no CPU time.
    const waited = await run(action(`async (ctx) => { await ctx.getMetadata(); return 'waited'; }`), { host: slow, limits: { ...limits, timeoutMs: 20_000, cpuTimeMs: 300 } });
    expect(JSON.parse(waited!)).toBe('waited');
    // Computes in slices with awaits between: only the CPU bound stops it, long before the wall clock.
    const started = Date.now();
    const busy = `async (ctx) => { for (;;) { const until = Date.now() + 50; while (Date.now() < until) {} await ctx.getMetadata(); } }`;
    const error = await failure(run(action(busy), { host: { getMetadata: async () => ({}) }, limits: { ...limits, timeoutMs: 20_000, cpuTimeMs: 300 } }));
    expect(error.code).toBe('function_timed_out');
    expect(error.message).toContain('CPU time');
    // Half the wall clock's 20 s: on a loaded machine whose cores this run shares, 300 ms of
    // CPU time can take seconds of wall time to spend (5 s left little room).
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
