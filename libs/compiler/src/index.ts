export { bundleSource, type BundleInput, type BundleResult, type Diagnostic } from './bundle-source.js';
export { compileSource, type CompileResult } from './compile-source.js';
export { createCompiler, type Compiler, type CompilerOptions } from './compiler.js';
export { typeCheck } from './type-check.js';
