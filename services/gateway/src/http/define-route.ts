import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { ConnectSession, Scope } from '@latchkey/contracts';
import type { ErrorCode } from '@latchkey/errors';
import type { ResolvedKey } from '../domain/key-cache.js';
import type { GatewayDeps } from './deps.js';
import type { OwnHeaders } from './own-headers.js';

type Infer<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  deps: GatewayDeps;
  req: Request;
  res: Response;
}

export interface KeyedContext<P, Q, B> extends RouteContext<P, Q, B> {
  /** The caller's API key: its environment scopes every call. */
  key: ResolvedKey;
}

export interface SessionContext<P, Q, B> extends RouteContext<P, Q, B> {
  /** The connect session the end user's token names. */
  session: ConnectSession & { token: string };
}

export type RouteReply =
  | {
      status?: number;
      /** Sent as JSON; omitted for an empty body. */
      body?: unknown;
    }
  /** The handler wrote the response itself (a page, a redirect). */
  | { streamed: true };

interface Schemas<PS, QS, BS> {
  /** Unknown keys are refused: give strict object schemas. */
  params?: PS;
  query?: QS;
  body?: BS;
}

/**
 * Who may call a route: an API key with a scope, an end user's connect-session token (the
 * connect flow only), the operator, or anyone (health, webhooks).
 */
export type RouteAccess<PS, QS, BS> =
  | { auth: 'api_key'; scope: Scope; handler: (ctx: KeyedContext<Infer<PS>, Infer<QS>, Infer<BS>>) => Promise<RouteReply> }
  | { auth: 'connect_session'; scope: null; handler: (ctx: SessionContext<Infer<PS>, Infer<QS>, Infer<BS>>) => Promise<RouteReply> }
  | { auth: 'admin' | 'public'; scope: null; handler: (ctx: RouteContext<Infer<PS>, Infer<QS>, Infer<BS>>) => Promise<RouteReply> }
  /**
   * Data every environment shares (the provider catalog): an API key with any one of the
   * scopes, or an end user's connect-session token (the Connect UI reads the catalog).
   */
  | { auth: 'api_key_or_session'; scope: readonly Scope[]; handler: (ctx: RouteContext<Infer<PS>, Infer<QS>, Infer<BS>>) => Promise<RouteReply> };

/** A success answer a route gives instead of its main one, under a status of its own. */
export interface OtherAnswer {
  status: number;
  /** When the route answers this rather than its main answer. */
  when: string;
  /** Its JSON body; none when it has no body. */
  answer?: z.ZodType;
}

/**
 * What the API reference (`GET /openapi.json`, `docs/openapi.json`) says of a route beyond what
 * its declaration already tells: access, scope and input schemas are read from the route itself.
 */
export interface RouteDoc {
  summary: string;
  /** More than the summary: Markdown. */
  description?: string;
  /** The success answer's status; 200 when not given. */
  status?: number;
  /** The success answer's JSON body; a route that answers no body gives none. */
  answer?: z.ZodType;
  /** Success answers besides the main one (an action queued with `X-Async`: 202 and its handle). */
  otherAnswers?: readonly OtherAnswer[];
  /**
   * The query a route reads itself, where its declared schema takes any query so that the route
   * answers a bad one in its own way (`GET /connection/{id}`): what the reference lists.
   */
  query?: z.ZodType;
  /**
   * Statuses whose errors the route answers with a body of its own instead of the `{error}`
   * envelope (the deprecated `GET /connection/{id}`'s `{message}`), with that body.
   */
  errorBodies?: Readonly<Partial<Record<number, z.ZodType>>>;
  /** A success answer that is not JSON (a page, a script, an image). */
  contentType?: string;
  /** Error codes of the route's own work; those of its access and inputs are added for it. */
  errors?: readonly ErrorCode[];
  /** Request headers the route requires (the connection a call is for). */
  headers?: readonly ('Connection-Id' | 'Provider-Config-Key')[];
}

export type RouteDefinition<PS = unknown, QS = unknown, BS = unknown> = {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete' | 'all';
  path: string;
  schemas: Schemas<PS, QS, BS>;
  doc: RouteDoc;
  /** Path, query and body pass through untouched, unparsed and unvalidated. */
  raw?: true;
  /** The body carries functions' code: up to MAX_BODY_BYTES, not MAX_JSON_BODY_BYTES. */
  largeBody?: true;
  /**
   * `message`: the API document gives this endpoint's errors as an object with `message`; its
   * errors carry it beside the usual `error` envelope (every error, from access to the handler).
   */
  errorShape?: 'message';
} & RouteAccess<PS, QS, BS>;

/** One endpoint: method, path, who may call it, what it accepts, and what it does. */
export function defineRoute<
  PS extends z.ZodType | undefined = undefined,
  QS extends z.ZodType | undefined = undefined,
  BS extends z.ZodType | undefined = undefined,
>(route: RouteDefinition<PS, QS, BS>): RouteDefinition<PS, QS, BS> {
  return route;
}

// Routes are held in one list whatever their schemas; the mount step re-checks inputs at run time.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteDefinition<any, any, any>;

/**
 * A hot path served on node's own request and response, before express: every path under
 * `prefix`, any method, behind an API key with `scope` (or public, as provider webhooks are).
 * Same request ids, key, rate limit, scope check and error envelope as every other route; no
 * express routing, parsing or response helpers, which cost a third of the gateway's time on the
 * proxy path. The handler writes the whole response, the gateway's own headers (`ownHeaders`:
 * request id, rate limit) with its own, and answers paths or methods under its prefix that it
 * does not serve with `route_not_found`, as express would.
 */
export type BareRoute = {
  /** The paths under `prefix` the route serves, as the API reference names them. */
  doc: RouteDoc & { path: string; methods: readonly ('get' | 'post' | 'put' | 'patch' | 'delete')[] };
} & (
  | {
      prefix: string;
      auth?: 'api_key';
      scope: Scope;
      handler: (ctx: { deps: GatewayDeps; key: ResolvedKey; req: IncomingMessage; res: ServerResponse; ownHeaders: OwnHeaders }) => Promise<void>;
    }
  | {
      prefix: string;
      auth: 'public';
      scope: null;
      handler: (ctx: { deps: GatewayDeps; req: IncomingMessage; res: ServerResponse; ownHeaders: OwnHeaders }) => Promise<void>;
    }
);

export function defineBareRoute(route: BareRoute): BareRoute {
  return route;
}
