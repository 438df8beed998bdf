import { bundleSource, type Diagnostic } from './bundle-source.js';
import { typeCheck } from './type-check.js';

export type CompileResult = { ok: true; bundle: string; diagnostics: Diagnostic[] } | { ok: false; diagnostics: Diagnostic[] };

/**
 * Bundles and type-checks submitted source: it must bundle (importing only the SDK) and have no
 * type errors as the sandbox sees types. Nothing of it runs.
 */
export async function compileSource(source: string, filename?: string): Promise<CompileResult> {
  const bundled = await bundleSource({ source, ...(filename ? { filename } : {}) });
  if (!bundled.ok) return bundled;
  const typed = typeCheck(source, filename);
  if (typed.some((item) => item.severity === 'error')) return { ok: false, diagnostics: [...typed, ...bundled.diagnostics] };
  return { ok: true, bundle: bundled.bundle, diagnostics: [...typed, ...bundled.diagnostics] };
}
