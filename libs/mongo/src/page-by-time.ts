/**
 * A page of a log read newest first and paged back by time (`?before`, the last entry's time,
 * taken as "older than"). A page must end between two times: the entries sharing its last time
 * that did not fit would otherwise be skipped by the next page. So the entries of the last time
 * are left to the next page when the page holds newer ones too; when one time alone fills the
 * page, it holds every entry of that time, past `limit`.
 *
 * `read(count)` answers up to `count` entries, newest first, from where the page starts;
 * `readAt(time)` every entry of exactly that time (with the same filter).
 */
export async function pageByTime<T>(limit: number, read: (count: number) => Promise<T[]>, timeOf: (entry: T) => Date, readAt: (time: Date) => Promise<T[]>): Promise<T[]> {
  const entries = await read(limit + 1);
  if (entries.length <= limit) return entries;
  const last = timeOf(entries[limit - 1]!).getTime();
  if (timeOf(entries[limit]!).getTime() !== last) return entries.slice(0, limit);
  const whole = entries.slice(0, limit).filter((entry) => timeOf(entry).getTime() !== last);
  return whole.length > 0 ? whole : readAt(new Date(last));
}
