import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second of `/proc/<pid>/stat`'s CPU times (100 almost everywhere). */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds a process has used so far (user and system), or undefined without `/proc`. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may hold spaces: state is the 3rd, utime the 14th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
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

/**
 * Runs `work` and answers each group's CPU in µs per call over it (`calls` from its result), and
 * the whole machine's as `machine` where `/proc/stat` is readable, or undefined where `/proc` is
 * not there. On a shared machine,
 * throughput drifts with whatever else runs; the CPU each process spends per call drifts much
 * less. At saturation, throughput goes as the inverse of the machine's CPU per call: the load
 * generator, the upstream and the NATS server count there too.
 */
export async function cpuPerCall<T>(groups: ProcessGroups, work: () => Promise<T>, calls: (result: T) => number): Promise<{ result: T; usPerCall: Record<string, number> | undefined }> {
  const read = () => Object.fromEntries(Object.entries(groups).map(([name, pids]) => [name, pids.map(cpuSeconds)]));
  const before = read();
  const machineBefore = machineCpuSeconds();
  const result = await work();
  const machineAfter = machineCpuSeconds();
  const after = read();
  const count = calls(result);
  const usPerCall: Record<string, number> = {};
  if (count <= 0) return { result, usPerCall: undefined };
  for (const [name, seconds] of Object.entries(after)) {
    let spent = 0;
    for (const [index, value] of seconds.entries()) {
      const start = before[name]![index];
      if (value === undefined || start === undefined) return { result, usPerCall: undefined };
      spent += value - start;
    }
    usPerCall[name] = (spent * 1e6) / count;
  }
  if (machineBefore !== undefined && machineAfter !== undefined) usPerCall['machine'] = ((machineAfter - machineBefore) * 1e6) / count;
  return { result, usPerCall };
}
