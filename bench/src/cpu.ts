import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';

/** Clock ticks per second of `/proc/<pid>/stat`'s CPU times (100 almost everywhere). */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * The fields of `/proc/<pid>/stat` after the command name, which may hold spaces: from the state
 * (the 3rd field, index 0 here); the parent is index 1, utime 11 and stime 12. Throws where the
 * process is gone or `/proc` is not there.
 */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** CPU seconds a process has used so far (user and system), or undefined without `/proc`. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = statFields(pid);
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds the whole machine has spent so far, all cores, on anything but idling (user,
 * system and interrupts; `/proc/stat`), or undefined without `/proc`.
 */
export function machineCpuSeconds(): number | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal
    const busy = fields[0]! + fields[1]! + fields[2]! + fields[5]! + fields[6]! + fields[7]!;
    return Number.isFinite(busy) ? busy / ticksPerSecond : undefined;
  } catch {
    return undefined;
  }
}

/** Named groups of processes (the gateway, the replicas…) whose CPU a measurement adds up. */
export type ProcessGroups = Record<string, Array<number | undefined>>;

/** A process as `/proc` shows it: its parent, its program's file name and its whole command line. */
export interface ProcessInfo {
  parent: number;
  program: string;
  commandLine: string;
}

/** The pids of the processes `test` picks, among all this machine's (none where `/proc` is not there). */
export function processesWhere(test: (process: ProcessInfo) => boolean): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));
  } catch {
    return [];
  }
  return entries.map(Number).filter((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return test({ parent: Number(statFields(pid)[1]), program: basename(argv[0] ?? ''), commandLine: argv.join(' ') });
    } catch {
      return false; // gone meanwhile, or not ours to read
    }
  });
}

/**
 * Runs `work` and answers each group's CPU in µs per call over it (`calls` from its result),
 * each `shared` group's likewise, and the whole machine's as `machine` where `/proc/stat` is
 * readable, or undefined where `/proc` is not there. On a shared machine,
 * throughput drifts with whatever else runs; the CPU each process spends per call drifts much
 * less. At saturation, throughput goes as the inverse of the machine's CPU per call: the load
 * generator, the upstream and the NATS server count there too.
 */
export async function cpuPerCall<T>(
  groups: ProcessGroups,
  work: () => Promise<T>,
  calls: (result: T) => number,
  shared: ProcessGroups = {},
): Promise<{ result: T; usPerCall: Record<string, number> | undefined }> {
  type Readings = Record<string, Array<number | undefined>>;
  const read = (of: ProcessGroups): Readings => Object.fromEntries(Object.entries(of).map(([name, pids]) => [name, pids.map(cpuSeconds)]));
  const before = { own: read(groups), shared: read(shared) };
  const machineBefore = machineCpuSeconds();
  const result = await work();
  const machineAfter = machineCpuSeconds();
  const after = { own: read(groups), shared: read(shared) };
  const count = calls(result);
  if (count <= 0) return { result, usPerCall: undefined };
  /**
   * µs per call of each group. A process unread at either end fails the whole when `strict` (the
   * side's own), and is left out otherwise (shared: a database backend may come and go).
   */
  const spent = (start: Readings, end: Readings, strict: boolean): Record<string, number> | undefined => {
    const perCall: Record<string, number> = {};
    for (const [name, seconds] of Object.entries(end)) {
      let total = 0;
      for (const [index, value] of seconds.entries()) {
        const first = start[name]![index];
        if (value !== undefined && first !== undefined) total += value - first;
        else if (strict) return undefined;
      }
      perCall[name] = (total * 1e6) / count;
    }
    return perCall;
  };
  const own = spent(before.own, after.own, true);
  if (!own) return { result, usPerCall: undefined };
  const usPerCall = { ...own, ...spent(before.shared, after.shared, false) };
  if (machineBefore !== undefined && machineAfter !== undefined) usPerCall['machine'] = ((machineAfter - machineBefore) * 1e6) / count;
  return { result, usPerCall };
}
