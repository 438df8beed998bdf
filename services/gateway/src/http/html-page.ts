import { randomBytes } from 'node:crypto';
import type { Response } from 'express';

/**
 * The start of every page the gateway serves, up to its title (plain text, escaped by the
 * caller where it is not a constant). The empty icon spares the browser asking for
 * `/favicon.ico`, which the gateway answers 404.
 */
export const pageStart = (title: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${title}</title>`;

/**
 * Every HTML page the gateway serves (the Connect UI, the OAuth callback) goes out through here,
 * with one set of headers: scripts only from this origin or inline with this response's nonce,
 * no framing, no referrer (URLs carry session tokens and authorization codes), never cached.
 */
export function sendHtmlPage(res: Response, render: (nonce: string) => string, options: { stylesheets?: 'self' } = {}): void {
  const nonce = randomBytes(16).toString('base64');
  res.setHeader(
    'Content-Security-Policy',
    [
      "default-src 'none'",
      `script-src 'self' 'nonce-${nonce}'`,
      // A page may also link stylesheets from this origin (the API reference's renderer).
      options.stylesheets === 'self' ? "style-src 'self' 'unsafe-inline'" : "style-src 'unsafe-inline'",
      "img-src 'self' https: data:",
      "connect-src 'self'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join('; '),
  );
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  res.type('html').send(render(nonce));
}
