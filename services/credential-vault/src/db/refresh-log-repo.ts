import type { Connection } from 'mongoose';
import { refreshLogModel, type RefreshLogDoc } from './refresh-log-model.js';

export function createRefreshLogRepo(connection: Connection) {
  const model = refreshLogModel(connection);
  return {
    init: () => model.init(),
    insert: (doc: RefreshLogDoc) => model.create(doc),
  };
}
