/** A log line's message, in characters, at most. */
export const MAX_LOG_MESSAGE = 4096;
/** A log line's fields, as JSON, at most: larger ones are kept as a note of their size. */
export const MAX_LOG_FIELDS = 16 * 1024;

/**
 * Runs inside each isolate before the customer's bundle. The isolate is bare V8: no `require`,
 * `process`, timers, `fetch` or sockets. The only ways out are two references the host puts
 * on the global object, `__host` (an async call, JSON in and out, answered by the host's
 * table of context methods) and `__log`; this script hides them behind the context object and
 * `console`, then deletes the globals. `__run` is what the host calls.
 */
export const PRELUDE = String.raw`
// One function's scope, not the script's: a later script (the bundle) would see this script's
// top-level bindings, and with them the host's references.
(function () {
'use strict';
const host = globalThis.__host;
const logRef = globalThis.__log;
delete globalThis.__host;
delete globalThis.__log;
// WebAssembly memories are reserved outside the isolate's heap, past its memory limit (one run
// held 4 GiB): functions get no WebAssembly. It is reachable only from the global object.
delete globalThis.WebAssembly;
// Taken before the bundle runs, which may replace the globals. What goes to the host is made
// with these only, so it is always the text the host expects: a replaced JSON.stringify would
// hand it an array or an object whose length is not the size of what it holds.
const NativeRangeError = RangeError;
const NativeString = String;
const jsonStringify = JSON.stringify;
const jsonParse = JSON.parse;

function hostCall(runId, method, ...args) {
  return host.apply(undefined, [runId, method, jsonStringify(args)], { arguments: { copy: true }, result: { promise: true, copy: true } }).then((text) => {
    const reply = jsonParse(text);
    if (reply.ok) return reply.value;
    const error = new Error(reply.error.message);
    error.code = reply.error.code;
    throw error;
  });
}

function safeFields(fields) {
  if (fields === undefined) return undefined;
  try { return jsonStringify(fields); } catch { return jsonStringify({ unserializable: NativeString(fields) }); }
}

/** The run that is using this isolate now: console output goes to it. */
let currentRunId = 0;

// Taken now too: a log line is cut to size before it is copied out, with these.
const sliceText = Function.prototype.call.bind(String.prototype.slice);

function log(runId, level, message, fields) {
  // Cut here, not in the host: the host's copy of a line lives outside the isolate's memory
  // limit, and lines are not awaited, so a loop logging its largest string would pile copies up.
  const text = sliceText(NativeString(message), 0, ${MAX_LOG_MESSAGE});
  let fieldsJson = safeFields(fields);
  if (fieldsJson !== undefined && fieldsJson.length > ${MAX_LOG_FIELDS}) {
    fieldsJson = jsonStringify({ truncated: fieldsJson.length + ' characters of fields, over ${MAX_LOG_FIELDS}' });
  }
  logRef.applyIgnored(undefined, [runId, level, text, fieldsJson], { arguments: { copy: true } });
}

const format = (args) => args.map((arg) => (typeof arg === 'string' ? arg : (() => { try { return jsonStringify(arg); } catch { return NativeString(arg); } })())).join(' ');
globalThis.console = {
  log: (...args) => log(currentRunId, 'info', format(args)),
  info: (...args) => log(currentRunId, 'info', format(args)),
  debug: (...args) => log(currentRunId, 'debug', format(args)),
  warn: (...args) => log(currentRunId, 'warn', format(args)),
  error: (...args) => log(currentRunId, 'error', format(args)),
};

function pathGet(value, path) {
  if (!path) return value;
  return NativeString(path).split('.').reduce((node, key) => (node === null || node === undefined ? undefined : node[key]), value);
}

function nextLink(headers, rel) {
  const header = headers && (headers.link || headers.Link);
  if (!header) return undefined;
  for (const part of NativeString(header).split(',')) {
    const match = /<([^>]+)>\s*;\s*rel="?([^";]+)"?/i.exec(part);
    if (match && match[2].trim().toLowerCase() === NativeString(rel || 'next').toLowerCase()) return match[1];
  }
  return undefined;
}

function splitUrl(url) {
  const match = /^(https?:\/\/[^/?#]+)(\/[^?#]*)?(?:\?([^#]*))?/i.exec(url);
  if (!match) return { endpoint: url, params: {} };
  const params = {};
  for (const pair of (match[3] || '').split('&')) {
    if (!pair) continue;
    const at = pair.indexOf('=');
    const name = decodeURIComponent((at < 0 ? pair : pair.slice(0, at)).replace(/\+/g, ' '));
    params[name] = decodeURIComponent((at < 0 ? '' : pair.slice(at + 1)).replace(/\+/g, ' '));
  }
  return { baseUrlOverride: match[1], endpoint: match[2] || '/', params };
}

function makeContext(info) {
  const call = (method, ...args) => hostCall(info.runId, method, ...args);
  // The host hands a proxied answer over as text: a JSON one is parsed here, in this run's memory
  // limit; an answer that is not JSON stays text.
  const proxy = (config) => call('proxy', config).then(({ parse, ...answer }) => {
    if (parse && answer.data.length > 0) {
      try { answer.data = jsonParse(answer.data); } catch {}
    }
    return answer;
  });
  const method = (name) => (config) => proxy({ ...config, method: name });
  const ctx = {
    connectionId: info.connectionId,
    providerConfigKey: info.providerConfigKey,
    dryRun: info.dryRun,
    proxy,
    get: method('GET'),
    post: method('POST'),
    put: method('PUT'),
    patch: method('PATCH'),
    delete: method('DELETE'),
    getConnection: () => call('getConnection'),
    getIntegration: () => call('getIntegration'),
    getMetadata: () => call('getMetadata'),
    setMetadata: (metadata) => call('setMetadata', metadata),
    updateMetadata: (metadata) => call('updateMetadata', metadata),
    getEnvironmentVariables: () => call('getEnvironmentVariables'),
    batchSave: (records, model) => call('batchSave', records, model),
    batchUpdate: (records, model) => call('batchUpdate', records, model),
    batchDelete: (records, model) => call('batchDelete', records, model),
    getCheckpoint: () => call('getCheckpoint'),
    saveCheckpoint: (checkpoint) => call('saveCheckpoint', checkpoint),
    clearCheckpoint: () => call('clearCheckpoint'),
    log: (...args) => (['debug', 'info', 'warn', 'error'].includes(args[0]) && args.length > 1 ? log(info.runId, args[0], args[1], args[2]) : log(info.runId, 'info', args[0], args[1])),
    paginate: async function* paginate(config) {
      const settings = { ...((await call('paginateSettings')) || {}), ...(config.paginate || {}) };
      const type = settings.type;
      if (type !== 'cursor' && type !== 'link' && type !== 'offset') throw new Error('paginate: the provider has no proxy.paginate settings; pass paginate.type (cursor, link or offset)');
      const base = { ...config };
      delete base.paginate;
      let params = { ...(base.params || {}) };
      if (settings.limit !== undefined && settings.limit_name_in_request) params[settings.limit_name_in_request] = settings.limit;
      let request = { ...base, params };
      let offset = Number(params[settings.offset_name_in_request || 'offset'] || 0);
      // A provider that answers with the cursor or link it was just given has no next page: asked
      // again, it would answer the same page until the page limit.
      let currentLink;
      for (let page = 0; page < 10000; page++) {
        const response = await proxy(request);
        if (response.status >= 400) throw new Error('paginate: the provider answered ' + response.status);
        const records = pathGet(response.data, settings.response_path);
        const list = Array.isArray(records) ? records : [];
        if (list.length === 0) return;
        yield list;
        if (type === 'cursor') {
          const cursor = pathGet(response.data, settings.cursor_path_in_response);
          if (cursor === undefined || cursor === null || cursor === '') return;
          const cursorName = settings.cursor_name_in_request || 'cursor';
          if (params[cursorName] !== undefined && NativeString(cursor) === NativeString(params[cursorName])) return;
          params = { ...params, [cursorName]: cursor };
          request = { ...base, params };
        } else if (type === 'link') {
          const link = settings.link_path_in_response_body ? pathGet(response.data, settings.link_path_in_response_body) : nextLink(response.headers, settings.link_rel_in_response_header);
          if (!link || NativeString(link) === currentLink) return;
          currentLink = NativeString(link);
          const next = splitUrl(currentLink);
          request = { ...base, endpoint: next.endpoint, params: next.params, ...(next.baseUrlOverride ? { baseUrlOverride: next.baseUrlOverride } : {}) };
        } else {
          offset += list.length;
          params = { ...params, [settings.offset_name_in_request || 'offset']: offset };
          request = { ...base, params };
        }
      }
    },
  };
  return ctx;
}

function errorOf(error) {
  // The isolate's allocator refused an ArrayBuffer past the memory limit.
  if (error instanceof NativeRangeError && /Array buffer allocation failed/.test(NativeString(error.message))) {
    return { code: 'function_memory_exceeded', message: NativeString(error.message) };
  }
  if (error && typeof error === 'object') {
    return {
      code: typeof error.code === 'string' ? error.code : 'function_failed',
      message: NativeString(error.message || error),
      ...(error.issues ? { issues: error.issues } : {}),
      // Only the prelude's own check of the input says the input was wrong; the same code from a
      // context call (a bad batchSave after a provider's error page) is the function's failure.
      ...(error.inputInvalid === true ? { input: true } : {}),
    };
  }
  return { code: 'function_failed', message: NativeString(error) };
}

async function validate(schema, value, what) {
  if (!schema || !schema['~standard'] || typeof schema['~standard'].validate !== 'function') return value;
  const result = await schema['~standard'].validate(value);
  if (!result.issues) return result.value;
  const error = new Error(what + ' does not match its schema');
  error.code = what === 'input' ? 'invalid_body' : 'function_failed';
  error.inputInvalid = what === 'input';
  error.issues = result.issues.map((issue) => ({
    message: NativeString(issue.message),
    path: (issue.path || []).map((key) => (typeof key === 'object' && key !== null ? key.key : key)).join('.'),
  }));
  throw error;
}

globalThis.__run = async function (entry, inputJson, infoJson, maxOutput) {
  try {
    const definition = globalThis.__definition;
    if (!definition || typeof definition.exec !== 'function') throw new Error('the bundle does not export a function definition');
    const info = jsonParse(infoJson);
    currentRunId = info.runId;
    if (info.kind && definition.kind !== info.kind) throw new Error('the bundle defines a ' + definition.kind + ', not a ' + info.kind);
    const ctx = makeContext(info);
    if (definition.kind === 'sync') ctx.variant = info.variant || 'base';
    const input = inputJson === undefined ? undefined : jsonParse(inputJson);
    let output;
    if (entry === 'onWebhook') {
      if (typeof definition.onWebhook !== 'function') throw new Error('this sync has no onWebhook');
      output = await definition.onWebhook(ctx, input);
    } else if (definition.kind === 'action') {
      const checked = await validate(definition.input, input, 'input');
      output = await definition.exec(ctx, checked);
      output = await validate(definition.output, output, 'output');
    } else {
      output = await definition.exec(ctx);
    }
    const text = output === undefined ? undefined : jsonStringify(output);
    if (text !== undefined && text.length > maxOutput) {
      return jsonStringify({ ok: false, error: { code: 'action_output_too_large', message: 'The output is ' + text.length + ' characters; the limit is ' + maxOutput + ' bytes' } });
    }
    return jsonStringify({ ok: true, output: text, kind: NativeString(definition.kind), name: NativeString(definition.name) });
  } catch (error) {
    return jsonStringify({ ok: false, error: errorOf(error) });
  }
};
})();
`;

/** Wraps a CommonJS bundle so that its default export lands on `__definition`. */
export function wrapBundle(bundle: string): string {
  return `(function () { const module = { exports: {} }; const exports = module.exports;\n${bundle}\n;globalThis.__definition = module.exports && 'default' in module.exports ? module.exports.default : module.exports; })();`;
}
