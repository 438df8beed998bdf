import { join } from 'node:path';
import ts from 'typescript';
import type { Diagnostic } from './bundle-function.js';

const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ['lib.es2022.d.ts'],
  // The sandbox has no Node and no DOM: their globals must not type-check either.
  types: [],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  esModuleInterop: true,
  isolatedModules: true,
};

/**
 * Type-checks one function source as the sandbox will see it (ES2022, no Node or DOM globals),
 * with imports resolved from `resolveDir` (where `@latchkey/functions` is installed).
 */
export function typeCheck(source: string, resolveDir: string, filename = 'function.ts'): Diagnostic[] {
  const file = join(resolveDir, `__latchkey_${filename.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/\.[cm]?[jt]sx?$/, '')}.ts`);
  const host = ts.createCompilerHost(OPTIONS);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (name) => (name === file ? source : readFile(name));
  host.fileExists = (name) => name === file || fileExists(name);
  host.getSourceFile = (name, language, onError, create) =>
    name === file ? ts.createSourceFile(name, source, language, true) : getSourceFile(name, language, onError, create);
  host.writeFile = () => undefined;
  const program = ts.createProgram([file], OPTIONS, host);
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    const severity = diagnostic.category === ts.DiagnosticCategory.Error ? ('error' as const) : ('warning' as const);
    if (!diagnostic.file || diagnostic.start === undefined) return { severity, message };
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const text = diagnostic.file.text.split('\n')[line] ?? '';
    return diagnostic.file.fileName === file
      ? { severity, message, line: line + 1, column: character, text }
      : { severity, message: `${diagnostic.file.fileName}:${line + 1}: ${message}` };
  });
}
