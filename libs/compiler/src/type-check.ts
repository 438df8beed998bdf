import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import type ts from 'typescript';
import type { Diagnostic } from './bundle-source.js';
import { SDK_MODULE, sdkLocation } from './sdk-location.js';

/**
 * TypeScript, loaded by the first type-check: the compiler's child needs it, a service that
 * imports this library for `createCompiler` does not (9 MB of JavaScript, over a second of CPU
 * at every start of the sync-scheduler when it was imported with the library).
 */
let loaded: typeof ts | undefined;
const typescript = (): typeof ts => (loaded ??= createRequire(import.meta.url)('typescript') as typeof ts);

const optionsOf = (api: typeof ts): ts.CompilerOptions => ({
  target: api.ScriptTarget.ES2022,
  module: api.ModuleKind.ESNext,
  moduleResolution: api.ModuleResolutionKind.Bundler,
  lib: ['lib.es2022.d.ts'],
  // The sandbox has no Node and no DOM: their globals must not type-check either.
  types: [],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  esModuleInterop: true,
  isolatedModules: true,
});

/** Where the submitted source lives for the compiler: a path that is never on disk. */
const VIRTUAL_DIR = `${sep}__latchkey_source__${sep}`;

/**
 * Type-checks one function source as the sandbox will see it (ES2022, no Node or DOM globals).
 * The compiler host is closed: it reads only the submitted source, TypeScript's own `lib`
 * declarations and the SDK's declarations, so neither an import nor a `/// <reference path>`
 * nor module resolution can open any other file. Diagnostics quote only the submitted source.
 */
export function typeCheck(source: string, filename = 'function.ts'): Diagnostic[] {
  const ts = typescript();
  const OPTIONS = optionsOf(ts);
  const file = `${VIRTUAL_DIR}${filename.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/\.[cm]?[jt]sx?$/, '')}.ts`;
  const sdk = sdkLocation();
  const libDir = `${dirname(ts.getDefaultLibFilePath(OPTIONS))}${sep}`;
  const readable = (name: string) => (name.startsWith(libDir) && name.endsWith('.d.ts')) || name === sdk.types;
  const host = ts.createCompilerHost(OPTIONS);
  const readFile = host.readFile.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (name) => (name === file ? source : readable(name) ? readFile(name) : undefined);
  host.fileExists = (name) => name === file || (readable(name) && ts.sys.fileExists(name));
  host.directoryExists = (name) => `${name}${sep}` === VIRTUAL_DIR || name === dirname(sdk.types) || `${name}${sep}` === libDir;
  host.getDirectories = () => [];
  host.realpath = (name) => name;
  host.getSourceFile = (name, language, onError, create) =>
    name === file ? ts.createSourceFile(name, source, language, true) : readable(name) ? getSourceFile(name, language, onError, create) : undefined;
  host.writeFile = () => undefined;
  // Only the SDK resolves; every other specifier (a path, a package, a built-in) is "cannot find".
  host.resolveModuleNameLiterals = (literals) =>
    literals.map((literal) =>
      literal.text === SDK_MODULE
        ? { resolvedModule: { resolvedFileName: sdk.types, extension: sdk.types.endsWith('.d.ts') ? ts.Extension.Dts : ts.Extension.Ts, isExternalLibraryImport: true } }
        : { resolvedModule: undefined },
    );
  host.resolveTypeReferenceDirectiveReferences = (references) => references.map(() => ({ resolvedTypeReferenceDirective: undefined }));
  const program = ts.createProgram([file], OPTIONS, host);
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    const severity = diagnostic.category === ts.DiagnosticCategory.Error ? ('error' as const) : ('warning' as const);
    if (!diagnostic.file || diagnostic.start === undefined) return { severity, message };
    if (diagnostic.file.fileName !== file) return { severity, message: `in a library declaration: ${message}` };
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    return { severity, message, line: line + 1, column: character, text: diagnostic.file.text.split('\n')[line] ?? '' };
  });
}
