import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

/**
 * The README and docs/ are what users read, so every relative link in them must land: on a file
 * of the repository, and on a heading of it when the link names one. External links are not
 * followed (tests make no request off the machine).
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

/** GitHub's anchor for a heading: lower-cased, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (heading?.[1] !== undefined) anchors.add(anchorOf(heading[1]));
  }
  return anchors;
}

/** Relative link targets outside code blocks and code spans. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1] ?? '')
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('links in README.md and docs/', () => {
  it.each(pages)('%s links only to files and headings that exist', (page) => {
    const broken: string[] = [];
    for (const target of linksOf(readFileSync(join(root, page), 'utf8'))) {
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), decodeURIComponent(path));
      if (!existsSync(file)) {
        broken.push(`${target}: no ${relative(root, file)}`);
      } else if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(readFileSync(file, 'utf8')).has(anchor)) {
        broken.push(`${target}: no heading #${anchor} in ${relative(root, file)}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
