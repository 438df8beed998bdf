export { bundleFunction, type BundleInput, type BundleResult, type Diagnostic } from './bundle-function.js';
export { compileSource, type CompileResult } from './compile-source.js';
export { createCompiler, type Compiler, type CompilerOptions } from './compiler.js';
export { describeBundle } from './describe-bundle.js';
export { DeployError, deployDirectory, findFunctions, type DeployOptions, type DeployedIntegration } from './deploy.js';
export { typeCheck } from './type-check.js';
