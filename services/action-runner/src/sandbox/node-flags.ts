/** Whether node runs without its startup snapshot, which isolated-vm (7.x on Node 24 too) requires. */
export function snapshotDisabled(execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  return execArgv.includes('--no-node-snapshot') || (nodeOptions ?? '').split(/\s+/).includes('--no-node-snapshot');
}
