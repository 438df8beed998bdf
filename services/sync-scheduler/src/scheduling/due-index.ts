import type { ScheduleState } from '../domain/schedule-rules.js';

/**
 * The leader's schedules by next run time, in memory: a tick takes what is due from it instead
 * of querying `sync_schedules` by `next_run_at`, which FerretDB answers by reading every schedule
 * (it pushes down no filter but `_id` equality). It is a hint, never the truth: whatever a tick
 * takes is read again by `_id` before it is claimed. A min-heap with lazy removal: each schedule
 * has at most one live time (`times`); heap entries whose time is no longer it are skipped.
 */
export interface DueIndex {
  /** Places a schedule at its next run (running or not), or drops it while it cannot become due (paused, no time). */
  put(id: string, state: ScheduleState): void;
  remove(id: string): void;
  /** The ids due at `now`, earliest first, at most `limit`; they leave the index until put back. */
  take(now: Date, limit: number): string[];
  clear(): void;
  readonly size: number;
}

interface Entry {
  at: number;
  id: string;
}

export function createDueIndex(): DueIndex {
  const heap: Entry[] = [];
  const times = new Map<string, number>();

  const less = (a: Entry, b: Entry) => a.at < b.at;
  function up(index: number) {
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!less(heap[index]!, heap[parent]!)) return;
      [heap[index], heap[parent]] = [heap[parent]!, heap[index]!];
      index = parent;
    }
  }
  function down(index: number) {
    for (;;) {
      const left = 2 * index + 1;
      const right = left + 1;
      let least = index;
      if (left < heap.length && less(heap[left]!, heap[least]!)) least = left;
      if (right < heap.length && less(heap[right]!, heap[least]!)) least = right;
      if (least === index) return;
      [heap[index], heap[least]] = [heap[least]!, heap[index]!];
      index = least;
    }
  }
  function pop(): Entry | undefined {
    const top = heap[0];
    const last = heap.pop();
    if (top !== undefined && last !== undefined && heap.length > 0) {
      heap[0] = last;
      down(0);
    }
    return top;
  }
  /** Stale entries outnumbering live ones: rebuilt from the live times (bounds the heap at twice the schedules). */
  function compact() {
    if (heap.length <= 2 * times.size + 1024) return;
    heap.length = 0;
    for (const [id, at] of times) heap.push({ id, at });
    for (let index = (heap.length >> 1) - 1; index >= 0; index--) down(index);
  }

  return {
    put(id, state) {
      // "Not due yet" is all that matters here: paused schedules wait for their next change. A
      // running one stays, at its next run: if its run is still shown then, it may have been lost.
      const at = state.paused || state.next_run_at === null ? null : state.next_run_at.getTime();
      if (at === null) {
        times.delete(id);
        return;
      }
      if (times.get(id) === at) return;
      times.set(id, at);
      heap.push({ id, at });
      up(heap.length - 1);
      compact();
    },
    remove(id) {
      times.delete(id);
    },
    take(now, limit) {
      const due: string[] = [];
      while (due.length < limit && heap.length > 0 && heap[0]!.at <= now.getTime()) {
        const entry = pop()!;
        if (times.get(entry.id) !== entry.at) continue;
        times.delete(entry.id);
        due.push(entry.id);
      }
      return due;
    },
    clear() {
      heap.length = 0;
      times.clear();
    },
    get size() {
      return times.size;
    },
  };
}
