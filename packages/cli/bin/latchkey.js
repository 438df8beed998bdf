#!/usr/bin/env node
// The `latchkey` command. This file is committed, not built, so that `npm ci` can link it into
// node_modules/.bin in a fresh clone before anything is compiled; the command itself is in dist/.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('latchkey: the CLI is not built yet; run `make build` (or `npx tsc -b`) first\n');
  process.exit(1);
}
await import(entry.href);
