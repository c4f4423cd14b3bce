// run: one request normally; when the daemon's wait window runs out (202)
// the SDK waits on, and when an answer left output out (omittedBytes) it
// pages the logs to put it back, when they still hold it. A caller's own timeout ends it with
// 'timed_out' / 'wait_timeout', the process left running.

import { UnexpectedResponseError } from './errors.js'
import { processIdOf, record, toFrames, toLogsPage, toProcess, toWaitResult } from './normalize.js'
import { answerMargin, type HttpTransport, maxWaitWindow, type RequestOptions, seg } from './transport.js'
import type { InteractResult, LogFrame, RunningResult, RunResult, WaitResult } from './types.js'

/** Pages a timed-out run reads at most: it does not chase a live writer. */
const timedOutPages = 4

type Wire = Record<string, unknown>

/** What a run needs of the transport. */
type Reach = Pick<HttpTransport, 'json' | 'waitWindow' | 'logsPageSize'>

/** t, each of whose requests signal also aborts. */
function reach(t: HttpTransport, signal: AbortSignal | undefined): Reach {
  if (signal === undefined) return t
  return {
    json: (method: string, path: string, options: RequestOptions = {}) => t.json(method, path, { ...options, signal }),
    waitWindow: t.waitWindow, logsPageSize: t.logsPageSize,
  }
}

/** The time left until deadline (Infinity: unbounded), in ms. */
function left(deadline: number): number {
  return deadline - Date.now()
}

/**
 * The deadline of a caller's timeout in ms; omitted or 0 is unbounded. A
 * negative one (or NaN) is refused, as the daemon refuses it: taken for
 * "no timeout" it made a caller's error a wait without end.
 */
export function deadlineOf(timeout: number | undefined): number {
  notNegative('a timeout', timeout)
  return timeout !== undefined && timeout > 0 ? Date.now() + timeout : Infinity
}

/** Refuses a time (ms) that is negative or NaN: what names it, e.g. 'a timeout'. */
export function notNegative(what: string, ms: number | undefined): void {
  if (ms !== undefined && !(ms >= 0)) throw new RangeError(`conch: ${what} of ${ms} ms: it must not be negative`)
}

/** The daemon-side wait of one request: the window, or less when the caller's budget is shorter. */
export function window(t: Reach, deadline: number): number {
  return Math.max(1, Math.min(t.waitWindow, Math.ceil(left(deadline))))
}

/**
 * POSTs a run to path (/v1/processes/run or a session's commands/run) with
 * body, within the caller's timeout, and returns its RunResult. It comes back
 * before the process ends, with the output so far, when the caller asked for
 * idleTimeout, when the process waits for input, or when timeout runs out.
 */
export async function run(
  transport: HttpTransport, path: string, body: Wire, timeout: number | undefined, signal?: AbortSignal,
): Promise<RunResult> {
  const deadline = deadlineOf(timeout)
  const t = reach(transport, signal)
  const bounded = body.outputLimit !== undefined
  // Under keepLogs none the daemon keeps no output for later reading: no
  // page can bring back what an answer left out, and output written between
  // two requests is gone. The result is what the answers held, truncated
  // when they said output was dropped, with omittedBytes what they cut out.
  const unkept = body.keepLogs === 'none'
  // Logs pages are raw frames: a plain answer is the daemon's, whole when
  // it fits in the answer, else its head and tail.
  const plain = body.plain === true
  // Whether what an answer left out may be paged back in from the logs.
  const asCut = bounded || unkept || plain
  const idle = typeof body.idleTimeout === 'number' && body.idleTimeout > 0 ? body.idleTimeout : undefined
  let sent = idleWindow(t, deadline, idle)
  let began = Date.now()
  const { status, body: answer } = await t.json('POST', path, { json: { ...body, timeout: sent }, timeout: sent + answerMargin })
  const w = record(answer, 'run', status)
  if (status === 200) return finished(t, status, w, asCut)
  // A 202 says why it came (cameBack): for idleTimeout, the command was
  // quiet that long; for the timeout, only the wait ran out, and the command
  // goes on, and so does run. A daemon that does not say is judged by the
  // time: back before the wait asked for ran out, it saw the command idle.
  const quiet = (a: Wire): boolean =>
    idle !== undefined && (typeof a.cameBack === 'string' ? a.cameBack === 'idle_timeout' : Date.now() - began < sent)
  if (w.waitingForInput === true || (idle !== undefined && (quiet(w) || left(deadline) <= 0))) {
    return early(t, status, w, w.waitingForInput === true ? 'waiting_for_input' : left(deadline) <= 0 ? 'wait_timeout' : 'idle_timeout', asCut)
  }
  // Only the daemon's wait window ran out: wait on with bare interacts, which
  // (unlike wait) also come back when the process starts waiting for input,
  // or (with idleTimeout) has been quiet that long. They ask for no output
  // (outputLimit 1): the result is read once they are done, whole from the
  // logs, or, when the caller bounded it or asked for plain text, as the
  // daemon cuts it. Under keepLogs none they ask for the output, which is
  // only in their answers, each with the caller's outputLimit.
  const id = processIdOf(w, status, true)
  const held = new Held(plain)
  if (unkept) held.add(w)
  const result = (why: string | undefined, wait: () => WaitResult, pages: number): Promise<RunResult> => {
    const state = why === undefined ? 'terminal' : 'running'
    // Under keepLogs none nothing is kept to cut from cursor 0: the answers are all there is.
    if (unkept) return Promise.resolve(held.result(id, wait(), state, cursor, body.outputLimit))
    if (bounded || plain) return cut(t, id, body, why)
    return collect(t, id, wait(), pages, state, cursor, told)
  }
  let cursor = typeof w.next === 'string' && w.next !== '' ? w.next : undefined
  // The output's bytes up to the last answer's next, as the answers told
  // them: the first from the start, each interact after the one before.
  let told = answerBytes(w)
  while (left(deadline) > 0) {
    sent = idleWindow(t, deadline, idle)
    began = Date.now()
    const json = {
      timeout: sent,
      ...(unkept ? { ...(plain ? { plain } : {}), ...(bounded ? { outputLimit: body.outputLimit } : {}) } : { outputLimit: 1 }),
      ...(cursor === undefined ? {} : { cursor }), ...(idle === undefined ? {} : { idleTimeout: idle }),
    }
    const { status: s, body: b } = await t.json('POST', `/v1/processes/${seg(id)}/interact`, { json, timeout: sent + answerMargin })
    const a = record(b, 'interact', s)
    if (unkept) held.add(a)
    told += answerBytes(a)
    if (s === 200) {
      return result(undefined, () => toWaitResult(pick(a, ['reason', 'exitCode', 'signal', 'handled', 'cwd', 'error', 'oomKilled', 'usage', 'stdinDroppedBytes']), s), Infinity)
    }
    if (a.waitingForInput === true) return result('waiting_for_input', () => stillRunning('waiting_for_input'), Infinity)
    if (quiet(a)) return result('idle_timeout', () => stillRunning('idle_timeout'), Infinity)
    if (typeof a.next === 'string' && a.next !== '') cursor = a.next
    // Back for none of those, it came once the window ran out: one that
    // came sooner (not the daemon's) is asked again only once the window
    // has passed, not at once, as fast as it answers, for ever.
    const soon = Math.min(began + sent, deadline) - Date.now()
    if (soon > 0) await pause(soon, signal)
  }
  return result('wait_timeout', () => stillRunning('wait_timeout'), timedOutPages)
}

/**
 * The output of a run under keepLogs none, from its answers: their frames,
 * whether any said output was dropped (between two requests), what they cut
 * out (omittedBytes, summed, and where each did: the number of frames
 * before it and its omittedAfter), and with plain their plain text (the
 * daemon's rendering of each answer; the frames stay byte-exact).
 */
class Held {
  readonly frames: LogFrame[] = []
  lost = false
  omitted = 0
  readonly holes: Array<[number, string]> = []
  readonly #texts: Array<{ output: string; stdout: string; stderr: string }> | undefined

  constructor(plain: boolean) {
    this.#texts = plain ? [] : undefined
  }

  add(a: Wire): void {
    const frames = toFrames(a.logs)
    const gone = Number.isSafeInteger(a.omittedBytes) && (a.omittedBytes as number) > 0 ? a.omittedBytes as number : 0
    if (gone > 0 && typeof a.omittedAfter === 'string') {
      this.holes.push([this.frames.length + frames.findIndex((f) => f.cursor === a.omittedAfter) + 1, a.omittedAfter])
    }
    this.omitted += gone
    this.frames.push(...frames)
    this.lost ||= a.truncated === true
    this.#texts?.push({ output: str(a.output), stdout: str(a.stdout), stderr: str(a.stderr) })
  }

  /**
   * The RunResult of process id from what was held: ended with wait, or
   * running; with limit (the caller's outputLimit, which bounded each
   * answer) held to it as one answer is (see bound).
   */
  result(id: string, wait: WaitResult, state: 'running' | 'terminal', cursor: string | undefined, limit: unknown): RunResult {
    const ts = this.#texts
    const text = ts === undefined ? assemble(this.frames)
      : { output: ts.map((x) => x.output).join(''), stdout: ts.map((x) => x.stdout).join(''), stderr: ts.map((x) => x.stderr).join('') }
    const next = this.frames.length > 0 ? this.frames[this.frames.length - 1]!.cursor : cursor
    const first = this.holes.reduce<[number, string] | undefined>((m, h) => (m === undefined || h[0] < m[0] ? h : m), undefined)
    const omitted = this.omitted > 0 ? { omittedBytes: this.omitted, ...(first === undefined ? {} : { omittedAfter: first[1] }) } : {}
    const r = Object.assign(wait, { state, processId: id, logs: this.frames, truncated: this.lost }, next === undefined ? {} : { next }, text, omitted) as RunResult & Wire
    if (typeof limit === 'number' && Number.isSafeInteger(limit) && limit > 0) bound(r, limit, this.holes, ts !== undefined)
    return r
  }
}

/**
 * Holds r, the answers of a run under keepLogs none each bounded by limit,
 * to limit as one answer is: over it, the head (up to half the limit) and
 * the tail (up to the rest) of its frames, each cut between UTF-8
 * characters, what lies between counted in omittedBytes; omittedAfter is
 * the cursor of the head's last whole frame ('0' when it has none) unless
 * an answer left output out before it (holes), headFrames the frames of
 * the head. With plain, the answers' texts are held to the limit so
 * (output; stdout with stderr).
 */
function bound(r: RunResult & Wire, limit: number, holes: Array<[number, string]>, plain: boolean): void {
  const bytes = r.logs.map(frameData)
  const total = bytes.reduce((n, b) => n + b.length, 0)
  if (total > limit) {
    const head: LogFrame[] = []
    let room = Math.floor(limit / 2)
    let k = 0
    while (k < bytes.length && bytes[k]!.length <= room) {
      head.push(r.logs[k]!)
      room -= bytes[k]!.length
      k++
    }
    const whole = k
    if (room > 0 && k < bytes.length) {
      const b = bytes[k]!.subarray(0, headCut(bytes[k]!, room))
      if (b.length > 0) {
        head.push(cutFrame(r.logs[k]!, b))
        room -= b.length
      }
    }
    room = limit - (Math.floor(limit / 2) - room)
    const tail: LogFrame[] = []
    for (let j = bytes.length - 1; j >= k && room > 0; j--) {
      const b = bytes[j]!
      if (b.length <= room && (j > k || head.length === whole)) {
        tail.unshift(r.logs[j]!)
        room -= b.length
        continue
      }
      const c = b.subarray(tailCut(b, room))
      if (c.length > 0) tail.unshift(cutFrame(r.logs[j]!, c))
      break
    }
    const kept = [...head, ...tail]
    const before = holes.filter((h) => h[0] <= whole).reduce<[number, string] | undefined>((m, h) => (m === undefined || h[0] < m[0] ? h : m), undefined)
    r.omittedBytes = (typeof r.omittedBytes === 'number' ? r.omittedBytes : 0) + total - kept.reduce((n, f) => n + frameBytes(f), 0)
    r.omittedAfter = before !== undefined ? before[1] : whole > 0 ? r.logs[whole - 1]!.cursor : '0'
    r.headFrames = head.length
    r.logs = kept
    if (!plain) Object.assign(r, assemble(kept))
  }
  if (plain) {
    r.output = cutText(r.output, limit)
    r.stdout = cutText(r.stdout, limit - Math.min(Buffer.byteLength(r.stderr), Math.floor(limit / 2)))
    r.stderr = cutText(r.stderr, limit - Buffer.byteLength(r.stdout))
  }
}

/** The length of b's head of at most n bytes that ends between UTF-8 characters. */
function headCut(b: Uint8Array, n: number): number {
  while (n > 0 && n < b.length && (b[n]! & 0xc0) === 0x80) n--
  return n
}

/** Where b's tail of at most n bytes starts, between UTF-8 characters. */
function tailCut(b: Uint8Array, n: number): number {
  let i = Math.max(0, b.length - n)
  while (i > 0 && i < b.length && (b[i]! & 0xc0) === 0x80) i++
  return i
}

/** f, cut to b. */
function cutFrame(f: LogFrame, b: Uint8Array): LogFrame {
  return { ...f, data: f.encoding === 'base64' ? Buffer.from(b).toString('base64') : decoder.decode(b) }
}

/** s held to limit bytes: its head (up to half) and tail (up to the rest), between characters. */
function cutText(s: string, limit: number): string {
  const b = encoder.encode(s)
  if (b.length <= limit) return s
  const h = headCut(b, Math.floor(limit / 2))
  return decoder.decode(b.subarray(0, h)) + decoder.decode(b.subarray(tailCut(b, limit - h)))
}

/**
 * The RunResult of id as the daemon cuts it to the caller's outputLimit
 * (body's, with its plain): its output from the start, head and tail, with
 * omittedBytes, omittedAfter, headFrames and next as a run's own answer
 * has them. One bare interact from cursor 0 that waits as little as it can
 * gives it: 200 with the RunResult of a process that ended, else 202 with
 * the output so far. why: the run came back early for it (its rawReason),
 * undefined when the process ended; one that ended meanwhile is reported
 * as ended.
 */
async function cut(t: Reach, id: string, body: Wire, why: string | undefined): Promise<RunResult> {
  const json = { cursor: '0', timeout: 1, outputLimit: body.outputLimit, ...(body.plain === undefined ? {} : { plain: body.plain }) }
  const { status, body: b } = await t.json('POST', `/v1/processes/${seg(id)}/interact`, { json, timeout: 1 + answerMargin })
  const a = record(b, 'interact', status)
  if (status === 200) return finished(t, status, a, true)
  return early(t, status, a, why ?? 'wait_timeout', true)
}

/**
 * The daemon-side wait of one request of a run: the window, and with
 * idleTimeout at least a second more than it, so that one request can see
 * the command quiet that long (the daemon counts quiet from the request's
 * start); never past the caller's deadline.
 */
function idleWindow(t: Reach, deadline: number, idle: number | undefined): number {
  const w = window(t, deadline)
  if (idle === undefined) return w
  return Math.max(1, Math.min(Math.max(w, idle + 1000), maxWaitWindow, Math.ceil(left(deadline))))
}

/**
 * The RunResult of a 202 answer (w, of status), come back for why (its rawReason): the
 * output so far, the process running;
 * what the answer left out is paged back in, up to its next, unless the
 * caller bounded it.
 */
async function early(t: Reach, status: number, w: Wire, why: string, bounded: boolean): Promise<RunResult> {
  const id = processIdOf(w, status, true)
  const out: Wire = {
    ...stillRunning(why), processId: id, output: str(w.output), stdout: str(w.stdout),
    stderr: str(w.stderr), logs: toFrames(w.logs), truncated: w.truncated === true,
  }
  if (!bounded && typeof w.omittedBytes === 'number' && w.omittedBytes > 0 && typeof w.omittedAfter === 'string') {
    const { frames, whole } = await joinOmitted(t, id, out.logs as LogFrame[], w.omittedAfter, str(w.next), w.omittedBytes)
    if (whole) {
      Object.assign(out, { logs: frames }, await assembleInTurns(frames))
      return Object.assign(out, pick(w, ['next', 'cwd', 'lastOutputAt'])) as unknown as RunResult
    }
  }
  return Object.assign(out, pick(w, ['next', 'omittedBytes', 'omittedAfter', 'headFrames', 'cwd', 'lastOutputAt'])) as unknown as RunResult
}

function stillRunning(rawReason: string): WaitResult & { state: 'running'; waitingForInput: boolean } {
  return { reason: 'timed_out', rawReason, state: 'running', waitingForInput: rawReason === 'waiting_for_input' }
}

/**
 * The RunResult of a 200 answer (w, of status), with what it left out paged
 * back in unless the caller bounded it.
 */
async function finished(t: Reach, status: number, w: Wire, bounded: boolean): Promise<RunResult> {
  const wait = Object.assign(toWaitResult(w, status), { state: 'terminal' })
  const processId = processIdOf(w, status)
  const logs = toFrames(w.logs)
  if (bounded || typeof w.omittedBytes !== 'number' || w.omittedBytes <= 0 || typeof w.omittedAfter !== 'string') {
    return Object.assign(wait, {
      processId, output: str(w.output), stdout: str(w.stdout), stderr: str(w.stderr), logs,
    })
  }
  const { frames, whole } = await joinOmitted(t, processId, logs, w.omittedAfter, str(w.next), w.omittedBytes)
  if (!whole) {
    // The logs no longer hold what the answer left out (dropped, or never
    // kept: keepLogs none): the answer's head and tail, saying so.
    return Object.assign(wait, {
      processId, output: str(w.output), stdout: str(w.stdout), stderr: str(w.stderr), logs,
    }, pick(w, ['next', 'omittedBytes', 'omittedAfter', 'headFrames', 'truncated']))
  }
  const out = Object.assign(wait, { processId, logs: frames }, await assembleInTurns(frames)) as RunResult & Wire
  if (w.truncated === true) out.truncated = true
  // The result is whole: nothing is left out of it any more.
  delete out.omittedBytes
  delete out.omittedAfter
  delete out.headFrames
  return out
}

/**
 * The whole output of an answer that left bytes out, by the daemon's rule:
 * the answer's frames up to and including the one whose cursor is
 * omittedAfter (none when no frame has it; these are never cut), then the
 * frames of logs pages from omittedAfter on, up to and including the one
 * whose cursor is the answer's next (or an empty page). The answer's cut
 * frames after omittedAfter are not used: the pages give them whole.
 * dropped: retention dropped some of them before they were read (or
 * keepLogs none never kept them); whole: the pages gave all of it, up to
 * next, with none dropped.
 */
export async function joinOmitted(
  t: Reach, id: string, logs: LogFrame[], omittedAfter: string, next: string, omittedBytes: number,
): Promise<{ frames: LogFrame[]; dropped: boolean; whole: boolean }> {
  const frames = logs.slice(0, logs.findIndex((f) => f.cursor === omittedAfter) + 1)
  // The bytes of the frames after omittedAfter up to next: those the answer
  // left out, and those of its frames after the head (cut, and the tail).
  let room = logs.slice(frames.length).reduce((n, f) => n + frameBytes(f), omittedBytes)
  let dropped = false
  let reached = next === ''
  await pageLogs(t, id, omittedAfter, Infinity, (page, truncatedHead) => {
    // Frames after the last one taken were dropped (a process that writes
    // on outran the paging): the join cannot be whole, and the frame next
    // names may be gone with them, so that paging would never end.
    if (truncatedHead) {
      dropped = true
      return false
    }
    for (const f of page) {
      // Pages past those bytes without next, each frame counted one byte at
      // least, are not the daemon's: new cursors without end would be paged
      // for ever.
      room -= Math.max(frameBytes(f), 1)
      if (room < 0) {
        throw new UnexpectedResponseError(
          `conch: the logs of ${id}: pages past the ${omittedBytes} bytes the answer left out and held after its head, its next '${next.slice(0, 100)}' not among them: an answer that is not the API's`,
          200,
        )
      }
      frames.push(f)
      if (f.cursor === next) {
        reached = true
        return false
      }
    }
    return true
  })
  return { frames, dropped, whole: reached && !dropped }
}

/**
 * The RunResult of the process id: result, and its retained logs from the
 * start, at most pages pages and at most told bytes, the output the
 * daemon's answers held and left out up to the last one's next. Its next
 * is the last frame paged, else cursor, the daemon's last word on where
 * the output stood (a run back on the caller's timeout before any
 * output): reading on from it loses nothing written meanwhile.
 *
 * Pages go past told bytes (each frame counted one byte at least, as the
 * daemon's each hold one) only where the process wrote on after the last
 * answer: one still running stops there, the rest read on from next. A
 * process that ended wrote nothing after its last answer, so pages past
 * them are not the daemon's: a daemon naming a new cursor on every page
 * would be paged for ever.
 */
async function collect(
  t: Reach, id: string, result: WaitResult, pages: number, state: 'running' | 'terminal', cursor: string | undefined,
  told: number,
): Promise<RunResult> {
  const logs: LogFrame[] = []
  let truncated = false
  let first = true
  let room = told
  await pageLogs(t, id, undefined, pages, (page, head) => {
    if (head && !first) {
      // Retention dropped frames after those paged (a process that
      // writes on outran the paging): what is kept from here on is the
      // output's tail, its head dropped.
      logs.length = 0
    }
    truncated ||= head
    first = false
    for (const f of page) {
      room -= Math.max(frameBytes(f), 1)
      if (room < 0) {
        if (state === 'running') return false
        throw new UnexpectedResponseError(
          `conch: the logs of ${id}: pages past the ${told} bytes its answers said the output of the ended process holds: an answer that is not the API's`,
          200,
        )
      }
      logs.push(f)
    }
    return true
  })
  const last = logs.length > 0 ? logs[logs.length - 1]!.cursor : cursor
  const next = last === undefined || last === '' ? {} : { next: last }
  return Object.assign(result, { state, processId: id, logs, truncated, ...next }, await assembleInTurns(logs))
}

/**
 * Reads the logs of id after cursor, page by page, at most pages pages,
 * handing each to take until it returns false or a page is empty. A page is
 * bounded in bytes as well as in frames, so only an empty one is the end.
 * A page that names a cursor read already (its next, else its last frame's)
 * is not the API's: paging on would never end, and would hold its frames
 * again and again.
 */
export async function pageLogs(
  t: Reach, id: string, cursor: string | undefined, pages: number,
  take: (frames: LogFrame[], truncatedHead: boolean) => boolean,
): Promise<void> {
  const limit = t.logsPageSize
  const read = new Set<string>()
  for (let n = 0; n < pages; n++) {
    read.add(cursor ?? '')
    const { status, body } = await t.json('GET', `/v1/processes/${seg(id)}/logs`, { query: { cursor, limit } })
    const page = toLogsPage(body, status)
    if (page.items.length === 0 || !take(page.items, page.truncatedHead === true)) return
    cursor = page.next ?? page.items[page.items.length - 1]!.cursor
    if (read.has(cursor)) {
      throw new UnexpectedResponseError(
        `conch: the logs of ${id}: a page (HTTP ${status}) names cursor '${cursor.slice(0, 100)}', read already: an answer that is not the API's`,
        status,
      )
    }
  }
}

/**
 * Waits for id until deadline, one window at a time; undefined when the
 * deadline came first.
 */
export async function waitUntil(
  t: Reach, id: string, deadline: number, signal?: AbortSignal,
): Promise<WaitResult | undefined> {
  for (;;) {
    const timeout = window(t, deadline)
    const began = Date.now()
    const opts = { query: { timeout }, timeout: timeout + answerMargin, ...(signal ? { signal } : {}) }
    const { status, body } = await t.json('GET', `/v1/processes/${seg(id)}/wait`, opts)
    // 200: ended; 202: the window ran out with it running. Anything else
    // (an empty 200, another shape) is not the daemon's: asked again, it
    // was asked again at once, for ever.
    if (status === 200) return toWaitResult(record(body, 'wait', status), status)
    if (status !== 202) throw new UnexpectedResponseError(`conch: wait: an answer that is not the API's (HTTP ${status})`, status)
    // A 202 comes once the window ran out: one that came sooner (not the
    // daemon's) is asked again only once the window has passed, not at
    // once, as fast as it answers, for ever.
    const early = Math.min(began + timeout, deadline) - Date.now()
    if (early > 0) await pause(early, signal)
    if (left(deadline) <= 0) return undefined
  }
}

/** Waits ms, or until signal aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const done = (): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done)
  })
}

const decoder = new TextDecoder()
const encoder = new TextEncoder()

/**
 * The text fields of frames: all of it, stdout (and pty), stderr; invalid
 * UTF-8 replaced. In all of it, a character is never made of two channels'
 * bytes: each run of one channel's frames is decoded on its own.
 */
export function assemble(frames: LogFrame[]): { output: string; stdout: string; stderr: string } {
  const steps = assembling(frames)
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
  }
}

/** The output bytes assembleInTurns decodes between two turns of the event loop. */
const turnBytes = 1 << 20

/**
 * assemble's text fields of frames, the event loop turning after each MiB
 * or so: assembled in one go, the frames of a run's tens of MB of output
 * held it for a second or more.
 */
export async function assembleInTurns(frames: LogFrame[]): Promise<{ output: string; stdout: string; stderr: string }> {
  const steps = assembling(frames)
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
    await new Promise((resolve) => setImmediate(resolve))
  }
}

/**
 * Decodes frames frame by frame (a character whose bytes two frames split
 * is decoded whole, with the later), each run of one channel's frames on
 * its own for all of the output, and yields after each turnBytes or so;
 * it returns assemble's fields.
 */
function* assembling(frames: LogFrame[]): Generator<void, { output: string; stdout: string; stderr: string }> {
  let output = ''
  let stdout = ''
  let stderr = ''
  let run: InstanceType<typeof TextDecoder> | undefined
  let runChannel = ''
  const out = new TextDecoder()
  const err = new TextDecoder()
  let since = 0
  for (const f of frames) {
    const b = frameData(f)
    if (run === undefined || f.channel !== runChannel) {
      if (run !== undefined) output += run.decode()
      run = new TextDecoder()
      runChannel = f.channel
    }
    output += run.decode(b, { stream: true })
    if (f.channel === 'stdout' || f.channel === 'pty') stdout += out.decode(b, { stream: true })
    else if (f.channel === 'stderr') stderr += err.decode(b, { stream: true })
    since += b.length
    if (since >= turnBytes) {
      since = 0
      yield
    }
  }
  if (run !== undefined) output += run.decode()
  return { output, stdout: stdout + out.decode(), stderr: stderr + err.decode() }
}

/**
 * The output bytes an answer of a run or interact told of, after the
 * cursor it started from up to its next: those its frames hold (its head's
 * last and its tail's first cut to what it kept of them) and those it left
 * out between them.
 */
function answerBytes(w: Wire): number {
  const omitted = Number.isSafeInteger(w.omittedBytes) && (w.omittedBytes as number) > 0 ? w.omittedBytes as number : 0
  return toFrames(w.logs).reduce((n, f) => n + frameBytes(f), omitted)
}

/** A frame's bytes. */
function frameData(f: LogFrame): Uint8Array {
  return f.encoding === 'base64' ? Buffer.from(f.data, 'base64') : encoder.encode(f.data)
}

/** The bytes a frame holds. */
function frameBytes(f: LogFrame): number {
  return f.encoding === 'base64' ? Buffer.from(f.data, 'base64').length : Buffer.byteLength(f.data)
}

function pick(w: Wire, keys: string[]): Wire {
  const out: Wire = {}
  for (const k of keys) if (w[k] !== undefined) out[k] = w[k]
  return out
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : ''
}

/**
 * The answer of an interact call as it came: the RunResult of an ended
 * process, or the output so far of a running one. Nothing is paged: the
 * caller asks again from `next`.
 */
export function answer(status: number, w: Wire): InteractResult {
  const logs = toFrames(w.logs)
  const text = { output: str(w.output), stdout: str(w.stdout), stderr: str(w.stderr) }
  if (status === 200) {
    return Object.assign(toWaitResult(w, status), { running: false as const, processId: processIdOf(w, status), logs }, text)
  }
  const out: RunningResult = {
    running: true, processId: processIdOf(w, status, true), logs, ...text,
    waitingForInput: w.waitingForInput === true, process: toProcess(w, status),
  }
  if (typeof w.next === 'string') out.next = w.next
  if (typeof w.omittedBytes === 'number') out.omittedBytes = w.omittedBytes
  if (typeof w.omittedAfter === 'string') out.omittedAfter = w.omittedAfter
  return out
}
