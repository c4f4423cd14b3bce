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

/**
 * v as the string a raw* field keeps: an array or object as its JSON (never
 * String's, which recurses through an array nested without end, as JSON.parse
 * takes it, and throws a RangeError).
 */
function str(v: unknown): string {
  if (typeof v === 'string') return v
  if (v === undefined || v === null) return ''
  return typeof v === 'object' ? shown(v) : String(v)
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

/**
 * v shown in a message, at most 200 characters. JSON.parse takes JSON nested
 * a million levels deep, which JSON.stringify cannot give back (RangeError).
 */
function shown(v: unknown): string {
  try {
    return String(JSON.stringify(v)).slice(0, 200)
  } catch {
    return 'JSON nested too deep to show'
  }
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

/**
 * The LogFrames of v, an answer's logs: an item that is not an object is
 * dropped, and a frame's cursor, channel and data that are not strings are
 * empty (its encoding and timestamp of another type are dropped), as the
 * Python SDK takes them: no frame handed on breaks a reader of its fields.
 */
export function toFrames(v: unknown): LogFrame[] {
  if (!Array.isArray(v)) return []
  const out: LogFrame[] = []
  for (const f of v) {
    const frame = toFrame(f)
    if (frame !== undefined) out.push(frame)
  }
  return out
}

/** The LogFrame of f, by the rule of toFrames; undefined when f is not an object. */
export function toFrame(f: unknown): LogFrame | undefined {
  if (!isRecord(f)) return undefined
  if (typeof f.cursor === 'string' && typeof f.channel === 'string' && typeof f.data === 'string' &&
    (f.encoding === undefined || typeof f.encoding === 'string') && (f.timestamp === undefined || typeof f.timestamp === 'number')) {
    return f as unknown as LogFrame
  }
  const frame: Wire = { ...f, cursor: text(f.cursor), channel: text(f.channel), data: text(f.data) }
  if (typeof f.encoding !== 'string') delete frame.encoding
  if (typeof f.timestamp !== 'number') delete frame.timestamp
  return frame as unknown as LogFrame
}

function text(v: unknown): string {
  return typeof v === 'string' ? v : ''
}

/**
 * The process id of a run's or an interact's answer w, of status: its
 * processId (else, when orId, its id), a string that must be there.
 */
export function processIdOf(w: Wire, status: number, orId = false): string {
  const v = w.processId ?? (orId ? w.id : undefined)
  if (typeof v !== 'string' || v === '') throw notTheAPIs('run', status, `without its processId: ${shown(w)}`)
  return v
}

export function toLogsPage(v: unknown, status: number): LogsPage {
  const w = record(v, 'logs page', status)
  const page = { ...w, items: toFrames(array(w, 'items', 'logs page', status)) } as Wire
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
