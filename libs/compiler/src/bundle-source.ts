import { build, type Message, type Plugin } from 'esbuild';
import { dirname, resolve } from 'node:path';
import { SDK_MODULE, sdkLocation } from './sdk-location.js';

export interface Diagnostic {
  severity: 'error' | 'warning';
  message: string;
  line?: number;
  column?: number;
  text?: string;
}

export type BundleResult = { ok: true; bundle: string; diagnostics: Diagnostic[] } | { ok: false; diagnostics: Diagnostic[] };

/**
 * Source from anyone (the server's compile and dry-run routes): it may import
 * `@latchkey/functions` and nothing else (see `sourceOnly`).
 */
export interface BundleInput {
  source: string;
  filename?: string;
}

/** The label esbuild gives submitted source; only diagnostics located in it may quote a line. */
export function sourceLabel(filename: string | undefined): string {
  const name = (filename ?? 'function.ts').replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 100);
  return /\.[cm]?ts$/.test(name) ? name : `${name}.ts`;
}

/** `quotable`: the one file whose lines a diagnostic may quote. */
function toDiagnostic(severity: Diagnostic['severity'], message: Message, quotable: string): Diagnostic {
  const location = message.location;
  // A location in any other file (the SDK, or a file a plugin refused) is never quoted.
  const quoted = location && location.file === quotable;
  return {
    severity,
    message: message.text,
    ...(quoted ? { line: location.line, column: location.column, text: location.lineText } : {}),
  };
}

/** The SDK's code files (JavaScript when built; its TypeScript source under the test runner). */
const SDK_CODE = /\.(js|ts)$/;

/**
 * The resolver for untrusted source: every import, `require` and `import()` is refused except
 * `@latchkey/functions` (and the SDK's own relative imports inside its folder), and so is every
 * import attribute (`with { type: 'text' | 'json' | 'file' | … }`), so no path the source names
 * (absolute, relative, `/proc/…`) is ever opened and no loader but the SDK's JavaScript runs.
 * Node built-ins are refused here too, before esbuild would mark them external.
 */
function sourceOnly(): Plugin {
  const sdk = sdkLocation();
  const refuse = (text: string) => ({ errors: [{ text }] });
  return {
    name: 'latchkey-source-only',
    setup(builder) {
      builder.onResolve({ filter: /.*/ }, (args) => {
        if (Object.keys(args.with).length > 0) return refuse(`import attributes are not allowed: a function may import only ${SDK_MODULE}`);
        if (args.path === SDK_MODULE) return { path: sdk.entry };
        if (args.importer.startsWith(sdk.dir) && args.path.startsWith('./')) {
          const inside = resolve(dirname(args.importer), args.path);
          if (inside.startsWith(sdk.dir) && SDK_CODE.test(inside)) return { path: inside };
        }
        return refuse(`"${args.path}" cannot be imported: a function may import only ${SDK_MODULE}`);
      });
      // Whatever resolved is the SDK's JavaScript; anything else is refused before it is read.
      builder.onLoad({ filter: /.*/ }, (args) => (args.path.startsWith(sdk.dir) && SDK_CODE.test(args.path) ? undefined : refuse('only the functions SDK is loaded')));
    },
  };
}

/**
 * Bundles submitted source into a single CommonJS script whose default export is the definition:
 * the SDK is inlined, so the sandbox needs no module loader, and every other import is refused.
 * The output has the shape `latchkey deploy` gives a developer's own files (`@latchkey/cli`'s
 * `bundleFunction`): both feed the same sandbox.
 */
export async function bundleSource(input: BundleInput): Promise<BundleResult> {
  const label = sourceLabel(input.filename);
  try {
    const result = await build({
      stdin: { contents: input.source, loader: 'ts', sourcefile: label },
      plugins: [sourceOnly()],
      // No tsconfig.json or package.json of the server's is read or applied to the source.
      tsconfigRaw: {},
      absWorkingDir: sdkLocation().dir,
      bundle: true,
      write: false,
      format: 'cjs',
      platform: 'node',
      target: 'es2022',
      minify: true,
      legalComments: 'none',
      logLevel: 'silent',
      charset: 'utf8',
    });
    const file = result.outputFiles[0];
    const warnings = result.warnings.map((warning) => toDiagnostic('warning', warning, label));
    if (!file) return { ok: false, diagnostics: [...warnings, { severity: 'error', message: 'esbuild produced no output' }] };
    return { ok: true, bundle: file.text, diagnostics: warnings };
  } catch (error) {
    const failure = error as { errors?: Message[]; warnings?: Message[] };
    if (!Array.isArray(failure.errors)) throw error;
    return {
      ok: false,
      diagnostics: [...failure.errors.map((item) => toDiagnostic('error', item, label)), ...(failure.warnings ?? []).map((item) => toDiagnostic('warning', item, label))],
    };
  }
}
