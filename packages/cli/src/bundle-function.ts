import { build, type Message } from 'esbuild';

export interface Diagnostic {
  severity: 'error' | 'warning';
  message: string;
  line?: number;
  column?: number;
  text?: string;
}

export type BundleResult = { ok: true; bundle: string; diagnostics: Diagnostic[] } | { ok: false; diagnostics: Diagnostic[] };

function toDiagnostic(severity: Diagnostic['severity'], message: Message): Diagnostic {
  const location = message.location;
  return { severity, message: message.text, ...(location ? { line: location.line, column: location.column, text: location.lineText } : {}) };
}

/**
 * Bundles one of the developer's own function files into a single CommonJS script whose default
 * export is the definition: everything it imports is inlined (its imports resolve as Node's
 * would, from the developer's project), so the sandbox needs no module loader. Node built-ins
 * stay as `require(…)` calls, which fail in the sandbox (it has no `require`). The server's
 * compile route gives submitted source the same shape.
 */
export async function bundleFunction(input: { entry: string }): Promise<BundleResult> {
  try {
    const result = await build({
      entryPoints: [input.entry],
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
    const warnings = result.warnings.map((warning) => toDiagnostic('warning', warning));
    if (!file) return { ok: false, diagnostics: [...warnings, { severity: 'error', message: 'esbuild produced no output' }] };
    return { ok: true, bundle: file.text, diagnostics: warnings };
  } catch (error) {
    const failure = error as { errors?: Message[]; warnings?: Message[] };
    if (!Array.isArray(failure.errors)) throw error;
    return {
      ok: false,
      diagnostics: [...failure.errors.map((item) => toDiagnostic('error', item)), ...(failure.warnings ?? []).map((item) => toDiagnostic('warning', item))],
    };
  }
}
