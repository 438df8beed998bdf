import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

/**
 * Tickets: `exec` saves a seed ticket, or fails while the connection's metadata says so;
 * `onWebhook` saves the ticket a provider webhook carries.
 */
export default defineSync({
  name: 'tickets',
  frequency: 'every day',
  models: { Ticket: z.object({ id: z.string(), subject: z.string() }) },
  webhookSubscriptions: ['ticket.updated'],
  exec: async (ctx) => {
    const metadata = await ctx.getMetadata();
    if (metadata['fail_tickets'] === true) throw new Error('the ticket service answered 500');
    await ctx.batchSave([{ id: 't-0', subject: 'Seed' }], 'Ticket');
  },
  onWebhook: async (ctx, payload) => {
    const { ticket } = payload as { ticket: { id: string; subject: string } };
    await ctx.batchSave([ticket], 'Ticket');
  },
});
