/**
 * Sync frequencies as deployments and customers write them: `every hour`, `every 30 minutes`,
 * `every day`, `every 2 hours`, or short forms `30m`, `2h`, `1d` (also `s`, `w`). Anything under
 * the floor (MIN_FREQUENCY_MS unless the operator lowers it, as tests do) is refused, so a typo
 * cannot turn a sync into a busy loop.
 */
export const MIN_FREQUENCY_MS = 60_000;
export const MAX_FREQUENCY_MS = 366 * 24 * 3600_000;

const UNIT_MS: Record<string, number> = {
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3600_000,
  hr: 3600_000,
  hrs: 3600_000,
  hour: 3600_000,
  hours: 3600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
  w: 7 * 86_400_000,
  week: 7 * 86_400_000,
  weeks: 7 * 86_400_000,
};

/** The interval in milliseconds, or undefined for a string that is not a frequency or is out of range. */
export function parseFrequency(text: string, floorMs = MIN_FREQUENCY_MS): number | undefined {
  const match = /^\s*(?:every\s+)?(?:(\d+)\s*)?([a-z]+)\s*$/i.exec(text);
  if (!match) return undefined;
  const [, amountText, unitText] = match;
  const unit = UNIT_MS[unitText!.toLowerCase()];
  if (unit === undefined) return undefined;
  // `every hour` means one; a bare unit without `every` (`hour`) is accepted the same way.
  const amount = amountText === undefined ? 1 : Number(amountText);
  const ms = amount * unit;
  if (!Number.isSafeInteger(ms) || ms < floorMs || ms > MAX_FREQUENCY_MS) return undefined;
  return ms;
}

/** Why `text` is refused as a frequency, as `invalid_frequency` says it. */
export function frequencyProblem(text: string, floorMs = MIN_FREQUENCY_MS): string {
  return `"${text}" is not a frequency: use e.g. "every hour", "every 30 minutes", "1d", "30m" (at least ${floorMs / 1000} s)`;
}
