import type { ServerResponse } from 'node:http';

/** Where the API-key check puts the rate-limit headers: a response, or a bare route's `OwnHeaders`. */
export interface HeaderSink {
  setHeader(name: string, value: string | number): unknown;
}

/** Letter case aside, with the length compared first (most names differ in it). */
const sameName = (a: string, b: string) => a.length === b.length && a.toLowerCase() === b.toLowerCase();

/**
 * The gateway's own headers of a bare route's answer (the request id, the rate limit, a
 * `Retry-After`), kept as a flat name and value list until the answer is written. The handler
 * sends them with its own in one `writeHead(status, list)`: node then builds the head straight from
 * the list, where a `setHeader` per header keeps a header map per response and walks it again
 * when the head is written (1.7 µs per proxied answer in a loop, for four headers of ours and four
 * of the provider's). An error answer sets them on the response first (`applyTo`).
 */
export class OwnHeaders implements HeaderSink {
  readonly #list: string[] = [];

  /** As `ServerResponse.setHeader`: a second value under a name replaces the first. */
  setHeader(name: string, value: string | number): this {
    for (let i = 0; i < this.#list.length; i += 2) {
      if (sameName(this.#list[i]!, name)) {
        this.#list[i + 1] = String(value);
        return this;
      }
    }
    this.#list.push(name, String(value));
    return this;
  }

  /**
   * Ours, then `more` (a provider's headers), as `writeHead` takes them. A name in `more`
   * replaces ours, as a later `setHeader` would; repeated names in `more` all go (`Set-Cookie`).
   * `bodyLength`, for a body sent whole, becomes `Content-Length` when `more` has neither it nor
   * `Transfer-Encoding`, as node adds it when `end(body)` writes the head.
   */
  with(more: ReadonlyArray<readonly [string, string]>, bodyLength?: number): string[] {
    const head: string[] = [];
    for (let i = 0; i < this.#list.length; i += 2) {
      const name = this.#list[i]!;
      if (!more.some(([other]) => sameName(other, name))) head.push(name, this.#list[i + 1]!);
    }
    let framed = false;
    for (const [name, value] of more) {
      head.push(name, value);
      if (!framed && (sameName(name, 'content-length') || sameName(name, 'transfer-encoding'))) framed = true;
    }
    if (bodyLength !== undefined && !framed) head.push('Content-Length', String(bodyLength));
    return head;
  }

  /** Sets ours on `res`, for an answer written another way (an error). */
  applyTo(res: ServerResponse): void {
    for (let i = 0; i < this.#list.length; i += 2) res.setHeader(this.#list[i]!, this.#list[i + 1]!);
  }
}
