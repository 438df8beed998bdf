import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCompiler } from './compiler.js';

/**
 * A stand-in for the compiler's child, so that a compile can hang or kill its process on cue:
 * `hang` never answers, `crash` exits, anything else comes back as its bundle. It answers one
 * message at a time, in order, as the real child does for one compile.
 */
const STAND_IN = `
process.on('message', ({ id, source }) => {
  if (source === 'hang') return;
  if (source === 'crash') process.exit(3);
  process.send({ id, result: { ok: true, bundle: source, diagnostics: [] } });
});
process.on('disconnect', () => process.exit(0));
`;

/** How long a hanging compile holds the child, and when the compiles behind it are asked for. */
const HANG_MS = 4_000;
const ASK_BEHIND_AFTER_MS = 2_500;

describe('createCompiler', () => {
  let dir: string;
  let entry: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'compiler-'));
    entry = join(dir, 'stand-in.mjs');
    writeFileSync(entry, STAND_IN);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('fails a compile that hangs alone, as a compile error, and the compiles waiting behind it still compile', async () => {
    const compiler = createCompiler({ entry, timeoutMs: HANG_MS });
    try {
      const hanging = compiler.compile('hang');
      // Asked for while the hang holds the child: their deadlines end after its own, with time
      // left for a fresh child to start on a loaded machine.
      await new Promise((resolve) => setTimeout(resolve, ASK_BEHIND_AFTER_MS));
      const behind = [compiler.compile('a'), compiler.compile('b')];
      await expect(hanging).resolves.toMatchObject({ ok: false, diagnostics: [{ severity: 'error', message: expect.stringContaining(`took longer than ${HANG_MS} ms`) }] });
      await expect(Promise.all(behind)).resolves.toMatchObject([{ bundle: 'a' }, { bundle: 'b' }]);
    } finally {
      await compiler.close();
    }
  });

  it('counts a compile\'s wait in its deadline: one that waited has only the rest of it', async () => {
    const compiler = createCompiler({ entry, timeoutMs: 3_000, maxWaitMs: 3_000 });
    try {
      const started = performance.now();
      const first = compiler.compile('hang');
      const second = compiler.compile('hang');
      await expect(first).resolves.toMatchObject({ ok: false });
      await expect(second).resolves.toMatchObject({ ok: false });
      // Both asked for at once: the second ends at its own deadline, not a whole timeout after the first.
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      await compiler.close();
    }
  });

  it('fails a compile whose child dies alone, and starts a fresh child for the next', async () => {
    const compiler = createCompiler({ entry, timeoutMs: 5_000 });
    try {
      const crashing = compiler.compile('crash');
      const behind = compiler.compile('after');
      await expect(crashing).resolves.toMatchObject({ ok: false, diagnostics: [{ message: expect.stringContaining('The compiler stopped while compiling this source') }] });
      await expect(behind).resolves.toMatchObject({ bundle: 'after' });
    } finally {
      await compiler.close();
    }
  });

  it('refuses a compile at once with 503 when its line is full, and one that waited too long', async () => {
    const compiler = createCompiler({ entry, timeoutMs: HANG_MS, maxWaiting: 2 });
    try {
      const running = compiler.compile('hang');
      await new Promise((resolve) => setTimeout(resolve, ASK_BEHIND_AFTER_MS));
      const waiting = [compiler.compile('a'), compiler.compile('b')];
      await expect(compiler.compile('c')).rejects.toMatchObject({ code: 'service_unavailable' });
      await expect(running).resolves.toMatchObject({ ok: false });
      await expect(Promise.all(waiting)).resolves.toHaveLength(2);
    } finally {
      await compiler.close();
    }
    const impatient = createCompiler({ entry, timeoutMs: 2_000, maxWaitMs: 500 });
    try {
      const running = impatient.compile('hang');
      await expect(impatient.compile('late')).rejects.toMatchObject({ code: 'service_unavailable' });
      await expect(running).resolves.toMatchObject({ ok: false });
    } finally {
      await impatient.close();
    }
  });
});
