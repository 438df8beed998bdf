import { randomBytes, randomUUID } from 'node:crypto';

/** Readable, prefixed ids (`env_…`, `key_…`): safe to show, never secrets. */
export function newId(prefix: 'acc' | 'env' | 'key'): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}

/** The id that appears in an environment's public webhook URLs. */
export function newPublicId(): string {
  return randomUUID();
}
