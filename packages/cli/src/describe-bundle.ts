import { createRequire } from 'node:module';
import { runInNewContext } from 'node:vm';
import { describeFunction, type FunctionDescription } from '@latchkey/functions';

/**
 * Reads what a bundle defines by evaluating it here, on the developer's machine (it is their
 * own code): name, type, schedule, models. The server runs it only inside its sandbox.
 */
export function describeBundle(bundle: string, filename: string): FunctionDescription {
  const module = { exports: {} as Record<string, unknown> };
  runInNewContext(bundle, { module, exports: module.exports, require: createRequire(filename), console }, { filename, timeout: 5000 });
  const exported = module.exports;
  return describeFunction('default' in exported ? exported['default'] : exported);
}
