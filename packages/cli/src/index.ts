export { bundleFunction, type BundleResult, type Diagnostic } from './bundle-function.js';
export { describeBundle } from './describe-bundle.js';
export { DeployError, deployDirectory, findFunctions, type DeployOptions, type DeployedIntegration } from './deploy.js';
export { InitError, initProject } from './init.js';
