// The daemon's JSON made into the SDK's types. A value the SDK does not know
// becomes 'unknown' with the string kept in its raw* field, and fields the SDK
// does not know are kept as they came: a newer daemon never breaks it.

import { isRecord, UnexpectedResponseError } from './errors.js'
import type {
  ListResult, LogFrame, LogsPage, ProcessDto, ProcessKeepLogs, ProcessReason, ProcessReportedKind,
  ProcessState, ProcessStdinMode, WaitResult,
} from './types.js'

type Wire = Record<string, unknown>

const kinds: ReadonlySet<string> = new Set(['exec', 'pty', 'code', 'session'])
const states: ReadonlySet<string> = new Set(['starting', 'provisioning', 'running', 'terminal'])
const stdins: ReadonlySet<string> = new Set(['closed', 'open'])
const keeps: ReadonlySet<string> = new Set(['until_cleanup', 'on_exit_ttl', 'none'])
const reasons: ReadonlySet<string> = new Set(['exited', 'signaled', 'timed_out', 'lost', 'failed'])

function known<T extends string>(set: ReadonlySet<string>, v: unknown): T | 'unknown' {
  return typeof v === 'string' && set.has(v) ? (v as T) : 'unknown'
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v)
}

// Every function here that refuses an answer is given the HTTP status it
// came with: UnexpectedResponseError carries the answer's status, and 0
// would say that nothing was answered in time (which streamLogs tries again).

/** v, an answer of status, as the JSON object its route answers: anything else is not the API's. */
export function record(v: unknown, what: string, status: number): Wire {
  if (!isRecord(v)) throw notTheAPIs(what, status, v === undefined ? 'an empty body' : shown(v))
  return v
}

/** w's field k, a string that must be there: without it, w is not the API's answer. */
function required(w: Wire, k: string, what: string, status: number): string {
  const v = w[k]
  if (typeof v !== 'string' || v === '') throw notTheAPIs(what, status, `without its ${k}: ${shown(w)}`)
  return v
}

/** w's field k, an array that must be there (a list's or a page's items). */
function array(w: Wire, k: string, what: string, status: number): unknown[] {
  const v = w[k]
  if (!Array.isArray(v)) throw notTheAPIs(what, status, `without its ${k}: ${shown(w)}`)
  return v
}

function notTheAPIs(what: string, status: number, why: string): UnexpectedResponseError {
  return new UnexpectedResponseError(`conch: ${what}: an answer that is not the API's (HTTP ${status}): ${why}`, status)
}

function shown(v: unknown): string {
  return String(JSON.stringify(v)).slice(0, 200)
}

/** The ProcessDto of a process as the daemon describes it, in an answer of status. */
export function toProcess(v: unknown, status: number): ProcessDto {
  const w = record(v, 'process', status)
  required(w, 'id', 'process', status)
  const p = { ...w } as Wire
  p.kind = known<ProcessReportedKind>(kinds, w.kind)
  p.rawKind = str(w.kind)
  p.state = known<ProcessState>(states, w.state)
  p.rawState = str(w.state)
  p.system = w.system === true
  if (w.stdin !== undefined) {
    p.stdin = known<ProcessStdinMode>(stdins, w.stdin)
    p.rawStdin = str(w.stdin)
  }
  if (w.keepLogs !== undefined) {
    p.keepLogs = known<ProcessKeepLogs>(keeps, w.keepLogs)
    p.rawKeepLogs = str(w.keepLogs)
  }
  if (w.reason !== undefined && w.reason !== '') {
    p.reason = known<ProcessReason>(reasons, w.reason)
    p.rawReason = str(w.reason)
  }
  return p as unknown as ProcessDto
}

const waitFields: ReadonlySet<string> = new Set(['reason', 'exitCode', 'signal', 'rawReason'])

/**
 * The WaitResult in w (a WaitResult, RunResult or process, in an answer of
 * status), other fields of w kept beside it.
 */
export function toWaitResult(w: Wire, status: number): WaitResult {
  const raw = required(w, 'reason', 'an ended process', status)
  const out: Wire = {}
  for (const [k, v] of Object.entries(w)) if (!waitFields.has(k)) out[k] = v
  const exitCode = typeof w.exitCode === 'number' ? w.exitCode : undefined
  const signal = typeof w.signal === 'string' && w.signal !== '' ? w.signal : undefined
  out.rawReason = raw
  switch (raw) {
    case 'exited':
      if (exitCode === undefined) break
      return Object.assign(out, { reason: 'exited', exitCode }) as WaitResult
    case 'signaled':
      if (signal === undefined) break
      // The union's signaled member has no exitCode: the status goes beside it (SignalReport).
      return Object.assign(out, { reason: 'signaled', signal }, defined({ signaledExitCode: exitCode })) as WaitResult
    case 'timed_out':
    case 'lost':
    case 'failed':
      return Object.assign(out, { reason: raw }, defined({ exitCode, signal })) as WaitResult
  }
  return Object.assign(out, { reason: 'unknown' }, defined({ exitCode, signal })) as WaitResult
}

function defined(o: Wire): Wire {
  const out: Wire = {}
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v
  return out
}

export function toFrames(v: unknown): LogFrame[] {
  return Array.isArray(v) ? (v as LogFrame[]) : []
}

export function toLogsPage(v: unknown, status: number): LogsPage {
  const w = record(v, 'logs page', status)
  const page = { ...w, items: array(w, 'items', 'logs page', status) } as Wire
  if (typeof w.next !== 'string' || w.next === '') delete page.next
  return page as unknown as LogsPage
}

export function toProcessList(v: unknown, status: number): ListResult<ProcessDto> {
  const w = record(v, 'process list', status)
  const items = array(w, 'items', 'process list', status).map((p) => toProcess(p, status))
  const list: ListResult<ProcessDto> = { ...w, items }
  if (typeof w.next !== 'string' || w.next === '') delete list.next
  return list
}
