import type { Model } from 'mongoose';
import { isDuplicateKey } from '@latchkey/mongo';

/**
 * Inserts documents, skipping those whose `_id` is stored already (a redelivered message writes
 * its record again). Any other failure throws.
 */
export async function insertNew<T>(model: Model<T>, docs: T[]): Promise<void> {
  try {
    await model.insertMany(docs, { ordered: false });
  } catch (error) {
    const writeErrors = (error as { writeErrors?: unknown[] }).writeErrors;
    const onlyDuplicates = Array.isArray(writeErrors) && writeErrors.length > 0 && writeErrors.every((item) => isDuplicateKey((item as { err?: unknown }).err ?? item));
    if (!onlyDuplicates && !isDuplicateKey(error)) throw error;
  }
}
