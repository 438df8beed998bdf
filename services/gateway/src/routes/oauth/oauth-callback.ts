import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { toAppError } from '@latchkey/errors';
import type { EnvironmentRepo } from '../../db/environment-repo.js';
import { defineRoute } from '../../http/define-route.js';
import { sendHtmlPage } from '../../http/html-page.js';
import { resultPage } from './result-page.js';

/**
 * Where the outcome may be posted: the Connect UI's own origin, and, once the flow is known to
 * belong to an environment, the origins that environment registered (`connect_return_origins`).
 */
export async function flowOrigins(
  deps: { config: { PUBLIC_URL: string; CONNECT_URL?: string | undefined }; environments: Pick<EnvironmentRepo, 'findById'> },
  environmentId: string | undefined,
): Promise<string[]> {
  const own = new URL(deps.config.CONNECT_URL ?? deps.config.PUBLIC_URL).origin;
  if (environmentId === undefined) return [own];
  const environment = await deps.environments.findById(environmentId);
  return [...new Set([own, ...(environment?.connect_return_origins ?? [])])];
}

/** A callback parameter that reads as absent when it is not one string within its bound. */
const lenient = (schema: z.ZodString) => schema.optional().catch(undefined);

/**
 * `GET /oauth/callback`: the provider's redirect, OAuth 2 (`code`, `state`) or OAuth 1.0a
 * (`oauth_token`, `oauth_verifier`). Public (the single-use state or temporary token is the proof);
 * answers with a page for the end user whatever happened, never a JSON error.
 */
export const oauthCallback = defineRoute({
  method: 'get',
  path: '/oauth/callback',
  auth: 'public',
  scope: null,
  doc: {
    summary: "The provider's redirect back: finishes the flow in a page that reports to its opener",
    contentType: 'text/html',
  },
  schemas: {
    // Providers add their own parameters (scope, session_state…): accept and ignore them. `iss`
    // (RFC 9207) goes to the vault, which checks it against the provider's issuer. A value of
    // ours that is too long or given twice is read as absent (an error description, only ever
    // shown, is cut), so that the end user still gets the page, never a JSON error.
    query: z.looseObject({
      iss: lenient(z.string().max(2048)),
      code: lenient(z.string().max(4096)),
      state: lenient(z.string().max(256)),
      error: lenient(z.string().max(256)),
      error_description: z
        .string()
        .max(1024)
        .optional()
        .catch(({ value }) => (typeof value === 'string' ? value.slice(0, 1024) : undefined)),
      // OAuth 1.0a (RFC 5849, 2.2): the temporary token and the verifier; or, refused, the
      // temporary token back as `denied` (Twitter's way), or with no verifier.
      oauth_token: lenient(z.string().max(1024)),
      oauth_verifier: lenient(z.string().max(1024)),
      denied: lenient(z.string().max(256)),
    }),
  },
  handler: async ({ deps, query, res }) => {
    let outcome: Parameters<typeof resultPage>[0];
    let environmentId: string | undefined;
    const oauth1 = query.oauth_token && query.oauth_verifier ? { oauth_token: query.oauth_token, oauth_verifier: query.oauth_verifier } : undefined;
    // An OAuth 1.0a refusal, never read into an OAuth 2 answer (a `code` with extra parameters).
    const deniedToken = query.code ? undefined : (query.denied ?? (query.oauth_token && !query.oauth_verifier ? query.oauth_token : undefined));
    if (query.error || deniedToken || (!oauth1 && (!query.code || !query.state))) {
      res.status(400);
      // The flow is spent, and its environment's registered origins hear of the refusal too.
      const refused = query.error ? query.state : deniedToken;
      if (refused) environmentId = (await deps.bus.request(vaultContracts.refuseOAuth, { state: refused }).catch(() => undefined))?.environment_id;
      // The provider's own words only for a flow of ours: anyone may open this page with any
      // `error_description`, and our page must not show their text to an end user.
      const reason = query.error
        ? environmentId
          ? `The provider refused: ${query.error_description ?? query.error}`
          : 'The provider refused the connection.'
        : deniedToken
          ? 'The provider refused: access denied'
          : 'The provider sent no authorization code.';
      outcome = { ok: false, message: reason };
    } else {
      try {
        const saved = oauth1
          ? await deps.bus.request(vaultContracts.finishOAuth1, oauth1)
          : await deps.bus.request(vaultContracts.finishOAuth, { state: query.state ?? '', code: query.code ?? '', ...(query.iss ? { iss: query.iss } : {}) });
        environmentId = saved.environment_id;
        outcome = { ok: true, connectionId: saved.connectionId, providerConfigKey: saved.providerConfigKey };
      } catch (error) {
        const appError = toAppError(error);
        outcome = { ok: false, message: appError.code === 'internal_error' ? 'Something went wrong; please try again.' : appError.message };
        res.status(appError.status);
        // A flow the vault found names its environment, for the failure to reach its registered origins.
        const named = appError.payload?.['environment_id'];
        if (typeof named === 'string') environmentId = named;
      }
    }
    const targets = await flowOrigins(deps, environmentId).catch(() => [new URL(deps.config.CONNECT_URL ?? deps.config.PUBLIC_URL).origin]);
    sendHtmlPage(res, (nonce) => resultPage(outcome, targets, nonce));
    return { streamed: true };
  },
});
