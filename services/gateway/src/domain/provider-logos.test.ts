import { describe, expect, it } from '@jest/globals';
import { createProviderLogos, PROVIDER_NAME } from './provider-logos.js';

const icons = [
  { title: 'GitHub', slug: 'github', hex: '181717', path: 'M1 1h22v22H1z' },
  { title: 'Google Calendar', slug: 'googlecalendar', hex: '4285F4', path: 'M2 2h20v20H2z' },
  { title: 'Google', slug: 'google', hex: '4285F4', path: 'M3 3h18v18H3z' },
];

describe('provider logos', () => {
  const logos = createProviderLogos(icons);

  it('draw the brand icon in its colour, the most specific match first', () => {
    expect(logos.svg('github')).toContain('<path fill="#181717" d="M1 1h22v22H1z"/>');
    expect(logos.svg('google-calendar')).toContain('<title>Google Calendar</title>');
    expect(logos.svg('google-sheets')).toContain('<title>Google</title>');
  });

  it('fall back to a monogram with the first letters, the same for the same name', () => {
    const svg = logos.svg('acme-crm');
    expect(svg).toContain('>AC</text>');
    expect(svg).not.toContain('<path');
    expect(logos.svg('acme-crm')).toBe(svg);
    expect(logos.svg('zendesk-sell')).not.toBe(svg);
  });

  it('take provider names only', () => {
    expect(PROVIDER_NAME.test('hubspot')).toBe(true);
    for (const bad of ['', '../etc', 'A', 'a/b', 'a b', '<svg>', `x${'y'.repeat(100)}`]) expect(PROVIDER_NAME.test(bad)).toBe(false);
  });
});
