import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Schema, type Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { connectMongo, environmentId, isDuplicateKey, scopedRepo } from './index.js';

interface Widget {
  _id: string;
  environment_id: string;
  name: string;
}

let mongo: TestMongo;
let connection: Connection;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('mongo'), logger: createLogger({ service: 'test', level: 'error' }) });
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('scoped repositories on a MongoDB-wire server', () => {
  it('never read or write across environments', async () => {
    const schema = new Schema<Widget>({ _id: String, environment_id: String, name: String }, { versionKey: false });
    schema.index({ environment_id: 1, name: 1 }, { unique: true });
    const model = connection.model<Widget>('Widget', schema);
    await model.init();
    const widgets = scopedRepo(model);
    const a = environmentId('env_a');
    const b = environmentId('env_b');

    await widgets.insert(a, { _id: 'w1', name: 'same' });
    await widgets.insert(b, { _id: 'w2', name: 'same' });
    expect(await widgets.findOne(a, { _id: 'w2' })).toBeNull();
    expect((await widgets.find(b)).map((widget) => widget._id)).toEqual(['w2']);
    expect(await widgets.updateOne(a, { _id: 'w2' }, { $set: { name: 'changed' } })).toBe(false);
    expect(await widgets.deleteOne(a, { _id: 'w2' })).toBe(false);
    expect(await widgets.count(b)).toBe(1);

    const duplicate = await widgets.insert(a, { _id: 'w3', name: 'same' }).catch((error: unknown) => error);
    expect(isDuplicateKey(duplicate)).toBe(true);
  });
});
