import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The parts of a V8 `.cpuprofile` (what `node --cpu-prof` writes) that the summary reads. */
interface CpuProfile {
  /** µs on the monotonic clock (`process.hrtime`'s, in µs), as are the samples' times. */
  startTime: number;
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
}

/** A script of the project's own: the workspace folder, and the package in it. */
const OUR_CODE = /\/(services|libs|packages|bench)\/([^/]+)\//;

/** Where a function's code lives, coarsely: the answer to "whose work is this?". */
export function areaOf(url: string, functionName: string): string {
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(program)') return 'V8 and native (not JavaScript)';
  if (!url) return functionName.startsWith('(') ? functionName : 'native built-ins';
  if (url.startsWith('node:')) return `node: ${url.slice(5).split('/')[0]}`;
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (inPackage) return `npm: ${inPackage[1]}`;
  const ours = OUR_CODE.exec(url);
  if (ours) return `${ours[1]}/${ours[2]}`;
  return 'other';
}

export interface ProfileSummary {
  /** Sampled time in the profiles, idle excluded, in µs. */
  busyUs: number;
  areas: Array<{ area: string; us: number }>;
  functions: Array<{ name: string; area: string; us: number }>;
  /**
   * The same time by the function of ours nearest the top of each sample's stack, with whatever
   * it called (node's socket writes, JSON, a package): what each step of a call costs in all.
   * Time with no function of ours on the stack (timers and I/O callbacks of node and of the
   * packages, V8's own work) is listed by the area its sample fell in.
   */
  owners: Array<{ name: string; us: number }>;
}

/** Whether a script is the project's own code, not node's or a package's (`areaOf`'s order). */
const isOurs = (url: string) => !url.includes('/node_modules/') && OUR_CODE.test(url);
const shortName = (frame: { functionName: string; url: string; lineNumber: number }) => {
  const where = frame.url ? `${frame.url.replace(/^.*\/(services|libs|packages|bench|node_modules)\//, '$1/')}:${frame.lineNumber + 1}` : '';
  return `${frame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
};

/** A span of the monotonic clock, in µs (`process.hrtime.bigint() / 1000n`). */
export interface Window {
  fromUs: number;
  toUs: number;
}

/**
 * Self time (the time a function itself ran, not its callees) of every `.cpuprofile` in `dir`
 * whose name starts with `prefix`, within `window` (start-up and warm-up left out), added up by
 * area and by function. Idle time is left out.
 */
export function summarizeProfiles(dir: string, prefix: string, window: Window): ProfileSummary {
  const areas = new Map<string, number>();
  const functions = new Map<string, { name: string; area: string; us: number }>();
  const owners = new Map<string, number>();
  let busyUs = 0;
  for (const file of readdirSync(dir).filter((name) => name.startsWith(prefix) && name.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    const byId = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
    const parentOf = new Map<number, number>();
    for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
    // Each node's owner once: the nearest frame of ours at or above it, if any.
    const ownerOf = new Map<number, string | null>();
    const owner = (id: number): string | null => {
      const known = ownerOf.get(id);
      if (known !== undefined) return known;
      const frame = byId.get(id)!;
      const parent = parentOf.get(id);
      const found = isOurs(frame.url) ? shortName(frame) : parent === undefined ? null : owner(parent);
      ownerOf.set(id, found);
      return found;
    };
    // Sample i was taken at startTime + the deltas up to i, and lasted until the next one.
    let at = profile.startTime;
    for (let i = 0; i < profile.samples.length; i++) {
      at += profile.timeDeltas[i] ?? 0;
      if (at < window.fromUs || at > window.toUs) continue;
      const frame = byId.get(profile.samples[i]!);
      if (!frame || frame.functionName === '(idle)') continue;
      const us = profile.timeDeltas[i + 1] ?? 0;
      const area = areaOf(frame.url, frame.functionName);
      busyUs += us;
      areas.set(area, (areas.get(area) ?? 0) + us);
      const name = shortName(frame);
      const ownedBy = owner(profile.samples[i]!) ?? `(no function of ours on the stack: ${area})`;
      owners.set(ownedBy, (owners.get(ownedBy) ?? 0) + us);
      const entry = functions.get(name) ?? { name, area, us: 0 };
      entry.us += us;
      functions.set(name, entry);
    }
  }
  const byTime = <T extends { us: number }>(list: T[]) => list.sort((a, b) => b.us - a.us);
  return {
    busyUs,
    areas: byTime([...areas].map(([area, us]) => ({ area, us }))),
    functions: byTime([...functions.values()]),
    owners: byTime([...owners].map(([name, us]) => ({ name, us }))),
  };
}

/** The summary as text: per area and for the busiest functions, µs per call and share of the busy time. */
export function formatProfile(title: string, summary: ProfileSummary, calls: number, top = 20): string {
  const perCall = (us: number) => (calls > 0 ? (us / calls).toFixed(1) : '-').padStart(7);
  const share = (us: number) => `${((100 * us) / Math.max(summary.busyUs, 1)).toFixed(1)}%`.padStart(6);
  const shown = summary.areas.filter(({ us }) => us >= summary.busyUs / 100);
  const rest = summary.areas.slice(shown.length);
  const restUs = rest.reduce((sum, { us }) => sum + us, 0);
  const lines = [
    `\n${title}: ${(summary.busyUs / 1e6).toFixed(2)} s busy over ${calls} calls = ${perCall(summary.busyUs).trim()} µs of CPU per call (self time; idle left out)`,
    '',
    `${'µs/call'.padStart(7)}  ${'share'.padStart(6)}  area`,
    ...shown.map(({ area, us }) => `${perCall(us)}  ${share(us)}  ${area}`),
    ...(rest.length > 0 ? [`${perCall(restUs)}  ${share(restUs)}  ${rest.length} more areas under 1% each`] : []),
    '',
    `${'µs/call'.padStart(7)}  ${'share'.padStart(6)}  function (the ${top} busiest)`,
    ...summary.functions.slice(0, top).map(({ name, us }) => `${perCall(us)}  ${share(us)}  ${name}`),
    '',
    `${'µs/call'.padStart(7)}  ${'share'.padStart(6)}  function of ours, with all it called (the ${top} busiest)`,
    ...summary.owners.slice(0, top).map(({ name, us }) => `${perCall(us)}  ${share(us)}  ${name}`),
  ];
  return lines.join('\n');
}
