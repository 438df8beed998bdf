import { describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { defineSync, describeFunction, type Model } from './index.js';

/** What a Standard Schema that is not zod looks like (valibot's object schema): no `shape`. */
const valibotLike = {
  kind: 'schema',
  type: 'object',
  expects: 'Object',
  async: false,
  entries: { id: { kind: 'schema', type: 'string' } },
  '~standard': { version: 1, vendor: 'valibot', validate: (value: unknown) => ({ value }) },
};

describe('describeFunction', () => {
  it("describes a sync's zod object and plain-map models", () => {
    const sync = defineSync({
      name: 'tickets',
      frequency: 'every hour',
      models: { Ticket: z.object({ id: z.string(), title: z.string().optional() }), Comment: { id: 'string', body: 'string' } },
      // As docs/functions.md writes it: a page of `paginate` goes to `batchSave` as it is (`tsc -b` checks that it type-checks).
      exec: async (ctx) => {
        for await (const page of ctx.paginate({ endpoint: '/tickets' })) await ctx.batchSave(page, 'Ticket');
      },
    });
    expect(describeFunction(sync)).toMatchObject({
      models: [
        { name: 'Ticket', fields: [{ name: 'id', type: 'string' }, { name: 'title', type: 'string?' }] },
        { name: 'Comment', fields: [{ name: 'id', type: 'string' }, { name: 'body', type: 'string' }] },
      ],
    });
  });

  it('refuses a model it cannot describe, rather than taking the schema object for a field map', () => {
    const sync = (model: unknown) => defineSync({ name: 'tickets', frequency: 'every hour', models: { Ticket: model as Model }, exec: () => undefined });
    expect(() => describeFunction(sync(valibotLike))).toThrow('sync tickets: model Ticket is neither a zod object (z.object(…)) nor a plain map of field name to type name');
    expect(() => describeFunction(sync({ id: 'string', count: 3 }))).toThrow(/model Ticket/);
    expect(() => describeFunction(sync(z.string()))).toThrow(/model Ticket/);
    expect(() => describeFunction(sync(null))).toThrow(/model Ticket/);
  });
});
