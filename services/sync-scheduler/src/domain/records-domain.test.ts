import { describe, expect, it } from '@jest/globals';
import { decodeCursor, encodeCursor } from './record-cursor.js';
import { canonicalJson, contentHash, recordId } from './record-content.js';
import { checkFields } from './record-fields.js';

describe('record content', () => {
  it('hashes the same record the same whatever its key order', () => {
    const a = canonicalJson({ id: '1', nested: { b: 2, a: [{ y: 1, x: 2 }] } });
    const b = canonicalJson({ nested: { a: [{ x: 2, y: 1 }], b: 2 }, id: '1' });
    expect(a).toBe(b);
    expect(contentHash(a)).toBe(contentHash(b));
    expect(contentHash(canonicalJson({ id: '1', nested: { a: [{ x: 3, y: 1 }], b: 2 } }))).not.toBe(contentHash(a));
  });

  it('takes string and integer ids only', () => {
    expect(recordId({ id: 'a' })).toBe('a');
    expect(recordId({ id: 42 })).toBe('42');
    for (const id of [undefined, null, '', 1.5, {}, 'x'.repeat(256)]) expect(recordId({ id })).toBeUndefined();
  });
});

describe('record fields', () => {
  const fields = [
    { name: 'id', type: 'string' },
    { name: 'count', type: 'integer' },
    { name: 'when', type: 'date' },
    { name: 'tags', type: 'string[]' },
    { name: 'note?', type: 'string' },
    { name: 'owner', type: 'string | null' },
    { name: 'extra', type: 'Contact', optional: true },
  ];

  it('accepts a record of the declared types and leaves undeclared fields alone', () => {
    expect(checkFields({ id: 'a', count: 2, when: '2026-01-01T00:00:00Z', tags: [], owner: null, unknown: 1 }, fields)).toEqual([]);
  });

  it('lists every missing or mistyped field', () => {
    const problems = checkFields({ id: 1, count: 1.5, when: 'yesterday-ish', tags: 'a', note: 3 }, fields);
    expect(problems.map((problem) => `${problem.path}:${problem.code}`)).toEqual([
      'id:invalid_type',
      'count:invalid_type',
      'when:invalid_type',
      'tags:invalid_type',
      'note:invalid_type',
    ]);
    expect(checkFields({}, [{ name: 'id', type: 'string' }])).toEqual([{ code: 'required', message: 'id is required', path: 'id' }]);
  });
});

describe('record cursors', () => {
  it('round-trip, and anything else is refused', () => {
    expect(decodeCursor(encodeCursor(12345))).toBe(12345);
    for (const cursor of ['', 'abc', Buffer.from('r1:-1').toString('base64url'), Buffer.from('r2:5').toString('base64url')]) {
      expect(decodeCursor(cursor)).toBeUndefined();
    }
  });
});
