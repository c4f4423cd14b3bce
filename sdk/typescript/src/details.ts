// The fields a run's result carries beyond the core RunResult, typed.

import type { RunDetails, RunningRun, RunResult } from './types.js'

/** The result with the fields `run` sets beside the core ones (state, next, cwd, ...) typed. */
export function runDetails(r: RunResult): RunResult & RunDetails {
  return r as RunResult & RunDetails
}

/** Whether the run came back before its process ended: the process goes on, `processId` reaches it. */
export function isRunning(r: RunResult): r is RunningRun {
  return (r as Partial<RunDetails>).state === 'running'
}
