import type { Model } from 'mongoose';
import { isDuplicateKey } from '@latchkey/mongo';

/**
 * Inserts documents, skipping those whose `_id` is stored already (a redelivered message writes
 * its record again). Any other failure throws. `lean`: the documents are stored as given, without
 * mongoose building and validating a document of each first; only for documents whose type
 * already requires every field (a fifth of the webhook router's CPU per inbound webhook went
 * there).
 */
export async function insertNew<T>(model: Model<T>, docs: T[], options: { lean?: boolean } = {}): Promise<void> {
  try {
    await model.insertMany(docs, { ordered: false, ...(options.lean && { lean: true }) });
  } catch (error) {
    const writeErrors = (error as { writeErrors?: unknown[] }).writeErrors;
    const onlyDuplicates = Array.isArray(writeErrors) && writeErrors.length > 0 && writeErrors.every((item) => isDuplicateKey((item as { err?: unknown }).err ?? item));
    if (!onlyDuplicates && !isDuplicateKey(error)) throw error;
  }
}
