import { describe, expect, it } from '@jest/globals';
import { createAddressPolicy, parseCidrList } from './address-policy.js';

const strict = createAddressPolicy({ allowCidrs: [] });

describe('address policy without exceptions', () => {
  it.each([
    ['8.8.8.8'],
    ['1.1.1.1'],
    ['172.32.0.1'], // just past 172.16.0.0/12
    ['100.128.0.1'], // just past 100.64.0.0/10
    ['2606:4700::1111'],
    ['2001:4860:4860::8888'],
    ['::ffff:8.8.8.8'], // IPv4-mapped, judged as 8.8.8.8
    ['64:ff9b::808:808'], // NAT64 of 8.8.8.8
    ['2002:808:808::1'], // 6to4 of 8.8.8.8
  ])('allows public %s', (address) => {
    expect(strict.check(address)).toEqual({ allowed: true });
  });

  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'], // 0.0.0.0/8, "this network"
    ['::', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'reserved'], // TEST-NET-1
    ['198.18.0.1', 'reserved'], // benchmarking
    ['2001:db8::1', 'reserved'], // documentation
    ['fc00::1', 'unique-local'],
    ['fdff:ffff::1', 'unique-local'],
    ['fec0::1', 'site-local'],
    ['100::1', 'discard'],
    ['::7f00:1', 'outside global unicast'], // deprecated IPv4-compatible form of 127.0.0.1
    ['4000::1', 'outside global unicast'],
  ])('refuses %s (%s)', (address, reason) => {
    const verdict = strict.check(address);
    expect(verdict.allowed).toBe(false);
    expect(verdict).toMatchObject({ reason: expect.stringContaining(reason) });
  });

  it.each([
    ['169.254.169.254', 'AWS'],
    ['fd00:ec2::254', 'AWS IPv6'],
    ['fd00:ec2:0:0:0:0:0:254', 'AWS IPv6'],
    ['100.100.100.200', 'Alibaba'],
    ['168.63.129.16', 'Azure'],
  ])('refuses the cloud metadata address %s', (address, cloud) => {
    expect(strict.check(address)).toEqual({ allowed: false, reason: expect.stringMatching(new RegExp(`^cloud metadata address .*${cloud}`)) });
  });

  it.each([
    ['::ffff:127.0.0.1', 'IPv4-mapped address of 127.0.0.1: loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped address of 127.0.0.1: loopback'],
    ['::ffff:169.254.169.254', 'IPv4-mapped address of 169.254.169.254: cloud metadata'],
    ['::ffff:0:10.0.0.1', 'IPv4-translated address of 10.0.0.1: private'],
    ['64:ff9b::127.0.0.1', 'NAT64 address of 127.0.0.1: loopback'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 address of 169.254.169.254: cloud metadata'],
    ['2002:a00:1::1', '6to4 address of 10.0.0.1: private'],
    ['2002:7f00:1::', '6to4 address of 127.0.0.1: loopback'],
    // Teredo: server 65.54.227.120 (public), client 127.0.0.1 obfuscated as 80ff:fffe.
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'Teredo address of 127.0.0.1: loopback'],
    // Teredo: server 10.0.0.1, client 8.8.8.8 obfuscated as f7f7:f7f7.
    ['2001:0:a00:1::f7f7:f7f7', 'Teredo address of 10.0.0.1: private'],
  ])('judges %s by the IPv4 address it carries', (address, reason) => {
    expect(strict.check(address)).toEqual({ allowed: false, reason: expect.stringContaining(reason) });
  });

  it('allows a Teredo address whose server and client are both public', () => {
    // Server 65.54.227.120, client 8.8.8.8.
    expect(strict.check('2001:0:4136:e378::f7f7:f7f7')).toEqual({ allowed: true });
  });

  it('refuses local-use NAT64, whose IPv4 position is network-specific', () => {
    expect(strict.check('64:ff9b:1::808:808')).toMatchObject({ allowed: false });
  });

  it.each([['localhost'], ['example.com'], [''], ['0x7f.1'], ['2130706433'], ['127.1'], ['[::1]'], ['127.0.0.1:80']])(
    'refuses %j, which is not an IP address literal',
    (text) => {
      expect(strict.check(text)).toEqual({ allowed: false, reason: 'not an IP address' });
    },
  );
});

describe('address policy with allowed CIDRs', () => {
  const policy = createAddressPolicy({ allowCidrs: ['127.0.0.0/8', 'fd12:3456::/32', '169.254.169.254/32'] });

  it('allows what an allowed CIDR contains', () => {
    expect(policy.check('127.0.0.1')).toEqual({ allowed: true });
    expect(policy.check('127.9.9.9')).toEqual({ allowed: true });
    expect(policy.check('fd12:3456::1')).toEqual({ allowed: true });
  });

  it('still refuses everything else', () => {
    expect(policy.check('10.0.0.1')).toMatchObject({ allowed: false, reason: 'private range' });
    expect(policy.check('::1')).toMatchObject({ allowed: false, reason: 'loopback range' });
    expect(policy.check('fd12:3457::1')).toMatchObject({ allowed: false, reason: 'unique-local range' });
  });

  it('applies an IPv4 exception to the IPv6 forms that carry the address', () => {
    expect(policy.check('::ffff:127.0.0.1')).toEqual({ allowed: true });
    expect(policy.check('64:ff9b::7f00:1')).toEqual({ allowed: true });
  });

  it('lets an operator open a metadata address, but only by an allowed CIDR', () => {
    expect(policy.check('169.254.169.254')).toEqual({ allowed: true });
    expect(policy.check('169.254.169.253')).toMatchObject({ allowed: false, reason: 'link-local range' });
  });

  it('throws at creation on a bad CIDR, naming it', () => {
    expect(() => createAddressPolicy({ allowCidrs: ['10.0.0.0/8', '10.0.0.0/33'] })).toThrow('"10.0.0.0/33"');
  });
});

describe('parseCidrList', () => {
  it('reads a comma-separated list, ignoring blanks', () => {
    expect(parseCidrList(' 10.0.0.0/8, fd00::/8 ,,192.168.1.7/32 ')).toEqual(['10.0.0.0/8', 'fd00::/8', '192.168.1.7/32']);
  });

  it('reads an empty text as an empty list', () => {
    expect(parseCidrList('')).toEqual([]);
    expect(parseCidrList(' , ')).toEqual([]);
  });

  it('names every bad entry in one error', () => {
    let message = '';
    try {
      parseCidrList('10.0.0.0/8,10.0.0.1,::1/129,0x7f.1/8,fe80::1%eth0/64,300.0.0.0/8,example.com/24');
    } catch (error) {
      message = (error as Error).message;
    }
    for (const bad of ['"10.0.0.1"', '"::1/129"', '"0x7f.1/8"', '"fe80::1%eth0/64"', '"300.0.0.0/8"', '"example.com/24"']) {
      expect(message).toContain(bad);
    }
    expect(message).not.toContain('"10.0.0.0/8"');
    expect(message).toContain('such as 10.0.0.0/8');
  });
});
