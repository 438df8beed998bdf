import { LRUCache } from 'lru-cache';

export interface CacheOptions<V = unknown> {
  /** Bound on entries: past it, the least recently used entry goes. */
  maxEntries: number;
  /**
   * A bound on what the entries weigh together (bytes, say), each weighed by `weigh`: past it,
   * the least recently used go too, and an entry heavier than the whole bound is not stored.
   */
  maxWeight?: { total: number; weigh: (value: V) => number };
  /** How long an entry lives unless its `set` says otherwise; without it, until evicted. */
  ttlMs?: number;
  /** The clock, in milliseconds; tests pass their own. */
  now?: () => number;
}

export interface SetOptions {
  /** A shorter (or longer) life for this entry than the cache's `ttlMs`. */
  ttlMs?: number;
  /** Names under which `invalidate` finds the entry (a connection id, a key digest…). */
  tags?: readonly string[];
  /**
   * Taken with `stamp()` before the value was read: if an invalidation it covers happened since,
   * the value may be stale already and is not stored.
   */
  since?: Stamp;
}

/** A moment in a cache's history of invalidations; see `Cache.stamp`. */
export interface Stamp {
  /** True while no invalidation that concerns the stamp has happened since it was taken. */
  current(): boolean;
}

export interface LoadOptions<V> {
  /** Where and for how long a loaded value is kept; false keeps it out of the cache. */
  place?: (value: V) => Omit<SetOptions, 'since'> | false;
  /** The stamp is taken for this tag only (see `stamp`); by default every invalidation counts. */
  tag?: string;
}

/** Past this many tags with a pending generation, the counters restart (and old stamps lapse). */
const MAX_TAG_GENERATIONS = 10_000;

/**
 * lru-cache calls an entry stale once its age exceeds its ttl, and reads a ttl of 0 as "none";
 * ours end when the age reaches it (`until > now` is alive), so each is given one millisecond
 * less. A life of a millisecond or less is not worth storing.
 */
const lifetime = (ms: number) => Math.ceil(ms) - 1;

interface Entry<V> {
  value: V;
  tags: readonly string[] | undefined;
}

/**
 * The one in-process cache of every service: bounded in size (least recently used goes first),
 * entries that expire, invalidation by tag (what a NATS event names) or of everything (after a
 * reconnect, when events may have been missed), and concurrent misses of one key sharing one
 * load. A read that an invalidation overtook is never stored: `stamp()` before reading, and
 * `set(…, { since })` after.
 */
export function createCache<V extends NonNullable<unknown>>(options: CacheOptions<V>) {
  const byTag = new Map<string, Set<string>>();
  const { maxWeight } = options;
  const lru = new LRUCache<string, Entry<V>>({
    max: options.maxEntries,
    ...(maxWeight ? { maxSize: maxWeight.total, sizeCalculation: (entry: Entry<V>) => Math.max(1, Math.ceil(maxWeight.weigh(entry.value))) } : {}),
    ...(options.ttlMs === undefined ? {} : { ttl: Math.max(1, lifetime(options.ttlMs)) }),
    // The clock is read on every check. lru-cache would otherwise keep a reading for a
    // millisecond and set a timer to forget it: under load, a timer per read of the cache.
    ttlResolution: 0,
    // An injected clock is shifted by one: lru-cache takes a start of 0 for "no start".
    ...(options.now ? { perf: { now: () => options.now!() + 1 } } : {}),
    dispose: (entry, key) => untag(key, entry.tags),
  });
  const pending = new Map<string, Promise<V>>();
  // Every invalidation or clear bumps `generation`; a clear bumps `epoch`; an invalidation of a
  // tag bumps that tag's own count, so a stamp for one tag outlives invalidations of others.
  let generation = 0;
  let epoch = 0;
  const tagGenerations = new Map<string, number>();

  function untag(key: string, tags: readonly string[] | undefined): void {
    if (!tags) return;
    for (const tag of tags) {
      const keys = byTag.get(tag);
      if (!keys) continue;
      keys.delete(key);
      if (keys.size === 0) byTag.delete(tag);
    }
  }

  function stamp(tag?: string): Stamp {
    if (tag === undefined) {
      const at = generation;
      return { current: () => generation === at };
    }
    const atEpoch = epoch;
    const atTag = tagGenerations.get(tag) ?? 0;
    return { current: () => epoch === atEpoch && (tagGenerations.get(tag) ?? 0) === atTag };
  }

  function set(key: string, value: V, setOptions: SetOptions = {}): void {
    if (setOptions.since && !setOptions.since.current()) return;
    const ms = setOptions.ttlMs ?? options.ttlMs;
    const ttl = ms === undefined ? undefined : lifetime(ms);
    if (ttl !== undefined && ttl < 1) return;
    const tags = setOptions.tags && setOptions.tags.length > 0 ? setOptions.tags : undefined;
    lru.set(key, { value, tags }, ttl === undefined ? undefined : { ttl });
    // A tiny bound can evict the entry at once; only a stored entry is indexed.
    if (!tags || !lru.has(key)) return;
    for (const tag of tags) {
      let keys = byTag.get(tag);
      if (!keys) byTag.set(tag, (keys = new Set()));
      keys.add(key);
    }
  }

  return {
    get(key: string): V | undefined {
      return lru.get(key)?.value;
    },
    has(key: string): boolean {
      return lru.has(key);
    },
    set,
    stamp,
    /**
     * The value under `key`: synchronously on a hit; on a miss from `loader`, whose promise every
     * concurrent miss of the key shares. A failed load is not kept.
     */
    load(key: string, loader: () => Promise<V>, loadOptions: LoadOptions<V> = {}): V | Promise<V> {
      const hit = lru.get(key);
      if (hit) return hit.value;
      let inFlight = pending.get(key);
      if (!inFlight) {
        const since = stamp(loadOptions.tag);
        inFlight = loader().then(
          (value) => {
            pending.delete(key);
            const placed = loadOptions.place ? loadOptions.place(value) : {};
            if (placed) set(key, value, { ...placed, since });
            return value;
          },
          (error: unknown) => {
            pending.delete(key);
            throw error;
          },
        );
        pending.set(key, inFlight);
      }
      return inFlight;
    },
    delete(key: string): void {
      lru.delete(key);
    },
    /** Drops every entry carrying `tag`; reads in flight for it (or for everything) are not stored. */
    invalidate(tag: string): void {
      generation++;
      if (tagGenerations.size >= MAX_TAG_GENERATIONS) {
        tagGenerations.clear();
        epoch++;
      }
      tagGenerations.set(tag, (tagGenerations.get(tag) ?? 0) + 1);
      const keys = byTag.get(tag);
      if (!keys) return;
      for (const key of [...keys]) lru.delete(key);
    },
    /** Drops everything; no read in flight is stored. */
    clear(): void {
      generation++;
      epoch++;
      tagGenerations.clear();
      lru.clear();
    },
    /** Entries held, expired ones not yet dropped included. */
    size: () => lru.size,
  };
}

export type Cache<V extends NonNullable<unknown>> = ReturnType<typeof createCache<V>>;
