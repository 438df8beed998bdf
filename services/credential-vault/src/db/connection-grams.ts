import type { ConnectionList } from './connection-model.js';

/** A gram is this many characters (code points) of the lowercased connection id. */
export const GRAM_LENGTH = 3;
/**
 * Ids longer than this (in characters) are not split into grams: each would cost an entry per
 * distinct gram (up to 253 for the 255 characters an id may hold, against 34 for a UUID).
 * They join one list, `long_id`, that every search of grams walks too.
 */
export const LONGEST_GRAMMED_ID = 64;
/** A needle's grams read at most: any of them finds every match, so a few spread along it do. */
const NEEDLE_GRAMS = 16;

/**
 * The distinct grams of a text, lowercased as `matchesFilter` compares (as a whole: some
 * characters lower to two), in order of first appearance. By code point, so a character
 * outside the BMP is one character of a gram, never half of one.
 */
export function gramsOf(text: string): string[] {
  const characters = Array.from(text.toLowerCase());
  const grams = new Set<string>();
  for (let start = 0; start + GRAM_LENGTH <= characters.length; start++) grams.add(characters.slice(start, start + GRAM_LENGTH).join(''));
  return [...grams];
}

/**
 * The grams a search for `needle` reads the lists of: every id that holds the needle (ignoring
 * case) holds each of them, so the smallest of their lists holds every match. None for a needle
 * shorter than a gram. A long needle's are spread from its first gram to its last.
 */
export function needleGrams(needle: string): string[] {
  const grams = gramsOf(needle);
  if (grams.length <= NEEDLE_GRAMS) return grams;
  return Array.from({ length: NEEDLE_GRAMS }, (_, i) => grams[Math.round((i * (grams.length - 1)) / (NEEDLE_GRAMS - 1))]!);
}

/** The search lists of a connection id: one per distinct gram, or `long_id` past the bound. */
export function searchListsOf(connectionId: string): ConnectionList[] {
  if (Array.from(connectionId).length > LONGEST_GRAMMED_ID) return [['long_id']];
  return gramsOf(connectionId).map((gram): ConnectionList => ['gram', gram]);
}
