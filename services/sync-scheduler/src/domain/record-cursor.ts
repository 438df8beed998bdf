/**
 * Cursors are opaque to callers: a record's place in the change order of its connection,
 * model and variant. Paging hands out records in that order, so reading on from a cursor
 * returns exactly what changed after it, whatever a sync writes meanwhile.
 */
export function encodeCursor(seq: number): string {
  return Buffer.from(`r1:${seq}`).toString('base64url');
}

/** The sequence number a cursor names, or undefined when it is not one of ours. */
export function decodeCursor(cursor: string): number | undefined {
  const match = /^r1:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return match ? Number(match[1]) : undefined;
}
