export { connectMongo, databaseUnavailable, findByIds, idListsIndexed, isDuplicateKey, isMongoConnected, isMongoUnavailable, type MongoOptions } from './connect-mongo.js';
export { environmentId, scopedRepo, type EnvironmentId, type EnvironmentScoped, type FindOptions, type ScopedRepo } from './scoped-repo.js';
export { pageByTime } from './page-by-time.js';
