#!/usr/bin/env node
// The `latchkey` command's entry point; the command itself is in command.ts, which tests import without running it.
import { main } from './command.js';

process.exitCode = await main(process.argv.slice(2));
