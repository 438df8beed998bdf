import type { Connection } from 'mongoose';
import { credentialReadModel, type CredentialReadDoc } from './credential-read-model.js';

export function createCredentialReadRepo(connection: Connection) {
  const model = credentialReadModel(connection);
  return {
    init: () => model.init(),
    insertMany: (docs: CredentialReadDoc[]) => model.insertMany(docs, { ordered: false }),
  };
}
