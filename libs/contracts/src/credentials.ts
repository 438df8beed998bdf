import { z } from 'zod';

/**
 * The credential types of the API document, as accepted on import (`POST /connections`) and
 * returned on fetch. Fields marked required in the document are required here.
 */
export const CREDENTIAL_TYPES = [
  'OAUTH2',
  'OAUTH1',
  'BASIC',
  'API_KEY',
  'APP',
  'JWT',
  'OAUTH2_CC',
  'APP_STORE',
  'CUSTOM',
  'TBA',
  'BILL',
  'TWO_STEP',
  'SIGNATURE',
] as const;
export type CredentialType = (typeof CREDENTIAL_TYPES)[number];

/**
 * Types whose credentials an end user never types in as they are (`vault.sessions.connect`):
 * OAuth 2 and 1 come from their flows, OAUTH2_CC from a token its own route buys first, and APP
 * tokens are bought with the integration's own app key for the installation the connection
 * names, which an end user must not pick.
 */
export const NOT_TYPED_IN: ReadonlySet<string> = new Set<CredentialType>(['OAUTH2', 'OAUTH1', 'OAUTH2_CC', 'APP']);

const raw = z.record(z.string(), z.unknown());
const secret = z.string().min(1).max(16_384);
const timestamp = z.iso.datetime({ offset: true });
const clientOverride = z.strictObject({ client_id: z.string().optional(), client_secret: z.string().optional() });

export const credentialsSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('OAUTH2'),
    access_token: secret,
    refresh_token: secret.optional(),
    expires_at: timestamp.optional(),
    config_override: clientOverride.optional(),
    raw,
  }),
  z.strictObject({ type: z.literal('OAUTH1'), oauth_token: secret, oauth_token_secret: secret, raw }),
  z.strictObject({ type: z.literal('BASIC'), username: z.string().min(1), password: z.string() }),
  z.strictObject({ type: z.literal('API_KEY'), apiKey: secret }),
  z.strictObject({ type: z.literal('APP'), access_token: secret, expires_at: timestamp.optional(), raw }),
  z.strictObject({
    type: z.literal('JWT'),
    privateKey: z.union([secret, z.strictObject({ id: z.string().min(1), secret })]),
    issuerId: z.string().optional(),
    privateKeyId: z.string().optional(),
    token: z.string().optional(),
    expires_at: timestamp.optional(),
  }),
  z.strictObject({
    type: z.literal('OAUTH2_CC'),
    client_id: z.string().min(1),
    client_secret: secret,
    token: secret,
    expires_at: timestamp.optional(),
    raw,
  }),
  z.strictObject({ type: z.literal('APP_STORE'), access_token: secret, private_key: secret, expires_at: timestamp.optional(), raw }),
  z.strictObject({ type: z.literal('CUSTOM'), raw }),
  z.strictObject({ type: z.literal('TBA'), token_id: z.string().min(1), token_secret: secret, config_override: z.strictObject({ client_id: z.string(), client_secret: z.string() }) }),
  z.strictObject({
    type: z.literal('BILL'),
    dev_key: secret,
    organization_id: z.string().min(1),
    username: z.string().min(1),
    password: secret,
    session_id: z.string().optional(),
    user_id: z.string().optional(),
    expires_at: timestamp.optional(),
    raw,
  }),
  z.strictObject({ type: z.literal('TWO_STEP'), raw, token: z.string().optional(), expires_at: timestamp.optional() }),
  z.strictObject({ type: z.literal('SIGNATURE'), username: z.string().min(1), password: secret, token: z.string().optional(), expires_at: timestamp.optional() }),
  // Unauthenticated: the API document's empty object, typed internally so one union checks all.
  z.strictObject({ type: z.literal('NONE') }),
]);

const isEmptyObject = (value: unknown) =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

/**
 * Credentials as accepted on import: one of the typed shapes, or `{}` for an unauthenticated
 * connection. A missing field is reported at its own path (`credentials.apiKey`).
 */
export const anyCredentials = z.preprocess((value) => (isEmptyObject(value) ? { type: 'NONE' } : value), credentialsSchema);
export type Credentials = z.infer<typeof credentialsSchema>;
export type AnyCredentials = z.infer<typeof anyCredentials>;
