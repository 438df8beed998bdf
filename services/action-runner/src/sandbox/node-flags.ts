/** Whether node runs without its startup snapshot, which isolated-vm requires from Node 20 on. */
export function snapshotDisabled(execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  return execArgv.includes('--no-node-snapshot') || (nodeOptions ?? '').split(/\s+/).includes('--no-node-snapshot');
}
