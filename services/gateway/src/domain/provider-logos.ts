import { createHash } from 'node:crypto';
import { createCache } from '@latchkey/cache';

/** A brand icon of a freely licensed set (simple-icons, CC0): one 24×24 path and its colour. */
export interface BrandIcon {
  title: string;
  slug: string;
  hex: string;
  path: string;
}

/** Provider names are catalog keys: lower-case letters, digits and dashes. */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9-]{0,99}$/;

/** The icons a provider name may match, most specific first: `google-calendar` → googlecalendar, google. */
function candidates(name: string): string[] {
  const parts = name.split('-').filter(Boolean);
  const found = new Set<string>([parts.join('')]);
  for (let length = parts.length - 1; length >= 1; length--) found.add(parts.slice(0, length).join(''));
  return [...found];
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

/** A monogram for a provider no icon matches: its first letters on a colour drawn from its name. */
function monogram(name: string): string {
  const letters = name.split('-').filter(Boolean).slice(0, 2).map((part) => part[0]!.toUpperCase()).join('');
  const hue = createHash('sha256').update(name).digest()[0]! * (360 / 256);
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" role="img"><title>${escapeXml(name)}</title>` +
    `<rect width="24" height="24" rx="5" fill="hsl(${Math.round(hue)} 55% 42%)"/>` +
    `<text x="12" y="16.2" text-anchor="middle" font-family="system-ui,sans-serif" font-size="${letters.length > 1 ? 10 : 13}" font-weight="600" fill="#fff">${escapeXml(letters)}</text></svg>`
  );
}

/** Logos for every provider name: the brand's icon where the set has one, else a monogram. */
export function createProviderLogos(icons: Iterable<BrandIcon>) {
  const bySlug = new Map<string, BrandIcon>();
  for (const icon of icons) bySlug.set(icon.slug, icon);
  // Names are bounded by the pattern, not their number: the cache keeps the most used.
  const rendered = createCache<string>({ maxEntries: 5_000 });
  return {
    /** The SVG document for a provider name (a valid name: see PROVIDER_NAME). */
    svg(name: string): string {
      let svg = rendered.get(name);
      if (svg !== undefined) return svg;
      const icon = candidates(name).map((slug) => bySlug.get(slug)).find((found) => found !== undefined);
      svg = icon
        ? `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" role="img"><title>${escapeXml(icon.title)}</title><path fill="#${icon.hex}" d="${escapeXml(icon.path)}"/></svg>`
        : monogram(name);
      rendered.set(name, svg);
      return svg;
    },
  };
}

export type ProviderLogos = ReturnType<typeof createProviderLogos>;
