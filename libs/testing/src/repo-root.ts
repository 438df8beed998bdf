import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: the nearest folder above this file that holds the workspace's Makefile. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'Makefile')) || !existsSync(join(dir, 'libs'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the repository root');
    dir = parent;
  }
  return dir;
}
