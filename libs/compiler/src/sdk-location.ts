import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';

/** The one module customer source may import. */
export const SDK_MODULE = '@latchkey/functions';

export interface SdkLocation {
  /** The SDK's bundled entry (real path). */
  entry: string;
  /** Its type declarations (real path). */
  types: string;
  /** The folder both live in (real path, ending with a separator). */
  dir: string;
}

let found: SdkLocation | undefined;

/** Where the SDK this package depends on is installed: found once, from this file, never from a caller's path. */
export function sdkLocation(): SdkLocation {
  if (found) return found;
  const entry = realpathSync(createRequire(import.meta.url).resolve(SDK_MODULE));
  const dir = `${dirname(entry)}${sep}`;
  // Built, the entry is `index.js` beside `index.d.ts`; under the test runner it maps to the `.ts` source.
  found = { entry, types: entry.endsWith('.ts') ? entry : entry.replace(/\.js$/, '.d.ts'), dir };
  return found;
}
