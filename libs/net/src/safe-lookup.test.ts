import type { LookupAddress, LookupAllOptions, LookupOptions } from 'node:dns';
import { describe, expect, it } from '@jest/globals';
import { createAddressPolicy } from './address-policy.js';
import { UpstreamNotAllowedError, checkUrlHost, createSafeLookup, type ResolveAll } from './safe-lookup.js';

const strict = createAddressPolicy({ allowCidrs: [] });

/** A resolver answering from a table, recording what it was asked. */
function fakeResolver(table: Record<string, LookupAddress[]>) {
  const calls: { hostname: string; options: LookupAllOptions }[] = [];
  const resolve: ResolveAll = (hostname, options, callback) => {
    calls.push({ hostname, options });
    const addresses = table[hostname];
    setImmediate(() => {
      if (addresses === undefined) callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
      else callback(null, addresses);
    });
  };
  return { resolve, calls };
}

interface LookupResult {
  error: NodeJS.ErrnoException | null;
  address: string | LookupAddress[];
  family: number | undefined;
}

function lookupWith(lookup: ReturnType<typeof createSafeLookup>, hostname: string, options: LookupOptions): Promise<LookupResult> {
  return new Promise((resolve) => {
    lookup(hostname, options, (error, address, family) => resolve({ error, address, family }));
  });
}

const v4 = (address: string): LookupAddress => ({ address, family: 4 });
const v6 = (address: string): LookupAddress => ({ address, family: 6 });

const table = {
  'api.example': [v4('93.184.215.14'), v6('2606:2800:21f:cb07:6820:80da:af6b:8b2c')],
  'mixed.example': [v4('93.184.215.14'), v4('10.0.0.7'), v6('2606:4700::1111')],
  'rebind.example': [v6('2606:4700::1111'), v6('::ffff:127.0.0.1')],
  'metadata.example': [v4('169.254.169.254')],
  'internal.example': [v4('127.0.0.1')],
  'empty.example': [],
};

describe('safe lookup', () => {
  it('hands the socket the first checked address when node asks for one', async () => {
    const { resolve, calls } = fakeResolver(table);
    const result = await lookupWith(createSafeLookup(strict, resolve), 'api.example', { family: 0, hints: 32 });
    expect(result).toEqual({ error: null, address: '93.184.215.14', family: 4 });
    // One resolution, of every address, with node's options passed on.
    expect(calls).toEqual([{ hostname: 'api.example', options: { family: 0, hints: 32, all: true } }]);
  });

  it('hands the socket every checked address when node asks for all', async () => {
    const { resolve } = fakeResolver(table);
    const result = await lookupWith(createSafeLookup(strict, resolve), 'api.example', { all: true });
    expect(result.error).toBeNull();
    expect(result.address).toEqual(table['api.example']);
  });

  it.each([[false], [true]])('refuses a name with any refused address among public ones (all: %s)', async (all) => {
    const { resolve } = fakeResolver(table);
    const { error, address } = await lookupWith(createSafeLookup(strict, resolve), 'mixed.example', { all });
    expect(error).toBeInstanceOf(UpstreamNotAllowedError);
    expect(error).toMatchObject({ code: 'upstream_not_allowed', hostname: 'mixed.example', address: '10.0.0.7', reason: 'private range' });
    expect(error?.message).toBe('Upstream address 10.0.0.7 (resolved from mixed.example) is not allowed: private range');
    expect(address).toEqual('');
  });

  it('refuses an IPv4-mapped loopback answer', async () => {
    const { resolve } = fakeResolver(table);
    const { error } = await lookupWith(createSafeLookup(strict, resolve), 'rebind.example', { all: true });
    expect(error).toMatchObject({ name: 'UpstreamNotAllowedError', address: '::ffff:127.0.0.1' });
  });

  it('refuses a name pointing at cloud metadata', async () => {
    const { resolve } = fakeResolver(table);
    const { error } = await lookupWith(createSafeLookup(strict, resolve), 'metadata.example', {});
    expect(error).toMatchObject({ address: '169.254.169.254', reason: expect.stringContaining('cloud metadata') });
  });

  it('allows an address inside an allowed CIDR', async () => {
    const { resolve } = fakeResolver(table);
    const lookup = createSafeLookup(createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }), resolve);
    expect(await lookupWith(lookup, 'internal.example', {})).toEqual({ error: null, address: '127.0.0.1', family: 4 });
  });

  it('passes resolver errors through untouched', async () => {
    const { resolve } = fakeResolver(table);
    const { error } = await lookupWith(createSafeLookup(strict, resolve), 'nowhere.example', {});
    expect(error).not.toBeInstanceOf(UpstreamNotAllowedError);
    expect(error?.code).toBe('ENOTFOUND');
  });

  it('treats an empty answer as not found', async () => {
    const { resolve } = fakeResolver(table);
    const { error } = await lookupWith(createSafeLookup(strict, resolve), 'empty.example', { all: true });
    expect(error?.code).toBe('ENOTFOUND');
  });
});

describe('checkUrlHost', () => {
  it('lets names through, for the safe lookup to judge', () => {
    expect(() => checkUrlHost('http://localhost:8080/x', strict)).not.toThrow();
    expect(() => checkUrlHost(new URL('https://api.example/'), strict)).not.toThrow();
  });

  it('allows public IP literals', () => {
    expect(() => checkUrlHost('https://8.8.8.8/', strict)).not.toThrow();
    expect(() => checkUrlHost('https://[2606:4700::1111]:8443/', strict)).not.toThrow();
  });

  it.each([
    ['http://127.0.0.1:3000/', '127.0.0.1'],
    ['http://[::1]/', '::1'],
    ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254'],
    ['http://2130706433/', '127.0.0.1'], // the WHATWG parser rewrites shorthand IPv4 hosts
    ['http://0x7f.1/', '127.0.0.1'],
    ['http://0/', '0.0.0.0'],
  ])('refuses %s', (url, address) => {
    let caught: unknown;
    try {
      checkUrlHost(url, strict);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UpstreamNotAllowedError);
    expect(caught).toMatchObject({ address, hostname: address });
  });

  it('never puts the URL, with its userinfo, path or query, in the message', () => {
    let message = '';
    try {
      checkUrlHost('http://user:hunter2@10.1.2.3/path?api_key=s3cret', strict);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe('Upstream address 10.1.2.3 is not allowed: private range');
  });

  it('honours allowed CIDRs', () => {
    expect(() => checkUrlHost('http://127.0.0.1:3000/', createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }))).not.toThrow();
  });
});
