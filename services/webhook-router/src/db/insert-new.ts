import type { Model, mongo } from 'mongoose';
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

/**
 * Inserts the docs with the driver (unordered), and answers the indexes of those whose `_id` was
 * taken: a unique insert that says which documents it did not store. Any other failure throws.
 */
export async function insertTaken<T extends { _id: string }>(collection: mongo.Collection<T>, docs: Array<mongo.OptionalUnlessRequiredId<T>>): Promise<number[]> {
  if (docs.length === 0) return [];
  try {
    await collection.insertMany(docs, { ordered: false });
    return [];
  } catch (error) {
    const writeErrors = (error as { writeErrors?: Array<{ index: number; code?: number; errmsg?: string }> }).writeErrors;
    if (!Array.isArray(writeErrors) || writeErrors.length === 0) throw error;
    if (!writeErrors.every((item) => isDuplicateKey({ code: item.code, message: item.errmsg }))) throw error;
    return writeErrors.map((item) => item.index);
  }
}
