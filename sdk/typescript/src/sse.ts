// streamLogs: a server-sent event reader of its own over fetch (the stream
// needs the Authorization header, which EventSource cannot send), resuming a
// dropped connection after the last frame it yielded.

import { ConchError, DeadlineExceededError, InvalidArgumentError, isRecord, UnexpectedResponseError } from './errors.js'
import { toFrame, toWaitResult } from './normalize.js'
import { waitUntil } from './run.js'
import { type HttpTransport, seg } from './transport.js'
import type { StreamLogEvent, StreamLogsOptions } from './types.js'

/**
 * Resumes in a row that may bring no event (cut again, not sent, or refused
 * with a status that may pass) before the stream gives up with an error
 * event; each waits 50 ms, doubled from one to the next, or a longer
 * Retry-After. The Go client and the Python SDK take the same rule.
 */
const maxRetries = 5

/**
 * Statuses of a refusal that may pass, tried again on a resume only: the
 * daemon at its --max-streams (another client took the place the cut stream
 * gave back), which sends no Retry-After, a proxy's 502 and 504, a 503. A
 * stream's first request so refused is an error at once, as any other
 * call's is.
 */
const passing: ReadonlySet<number> = new Set([429, 502, 503, 504])

/** The longest a Retry-After makes the stream wait before it tries again (ms). */
const maxPause = 30_000

interface RawEvent {
  event: string
  data: string
  id: string
}

/**
 * A timer that aborts a connection the daemon has sent nothing on for ms;
 * armed only while the stream waits on the daemon, never while its reader
 * holds an event.
 *
 * Once due, it aborts only after the event loop has read what waits on its
 * sockets (setImmediate runs after the loop's poll for I/O): a timer comes
 * due late when this process was held up (a loaded machine, a long
 * synchronous task), and the heartbeats the daemon sent meanwhile, waiting
 * to be read, then disarm it. Aborted at once, such a stream ended in an
 * error with the daemon's bytes unread.
 */
class Quiet {
  fired = false
  readonly #ms: number
  readonly #abort: () => void
  #timer: ReturnType<typeof setTimeout> | undefined
  #due: ReturnType<typeof setImmediate> | undefined

  constructor(ms: number, abort: () => void) {
    this.#ms = ms
    this.#abort = abort
  }

  arm(): void {
    this.disarm()
    // A bound past what a timer holds (Infinity) is none: setTimeout would fire at once.
    if (!(this.#ms <= 2 ** 31 - 1)) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      this.#due = setImmediate(() => {
        this.#due = undefined
        this.fired = true
        this.#abort()
      })
    }, this.#ms)
  }

  disarm(): void {
    clearTimeout(this.#timer)
    clearImmediate(this.#due)
    this.#timer = undefined
    this.#due = undefined
  }
}

/**
 * The most characters of one event a stream holds, its data and the line
 * not yet ended (16 MiB, the Python SDK's bound): far past any event of the
 * daemon, whose frames are 32 KiB at most. A longer one is not the API's: a
 * line without end would be held until the process ran out of memory.
 */
const maxEventLength = 16 << 20

/**
 * The events of an event-stream body of an answer of status, in order; ends
 * when the body ends. quiet is armed while it waits for the body's next
 * bytes (a heartbeat comment counts), disarmed while an event is yielded.
 * An event over maxEventLength throws UnexpectedResponseError.
 */
async function* parse(body: ReadableStream<Uint8Array>, quiet: Quiet, status: number): AsyncGenerator<RawEvent> {
  const decoder = new TextDecoder()
  // The line not ended yet, in the pieces it came in: joined once it ends,
  // never searched again for its end (which made a long line quadratic).
  let parts: string[] = []
  let partsLength = 0
  let ev: RawEvent = { event: 'message', data: '', id: '' }
  let hasData = false
  quiet.arm()
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    quiet.disarm()
    const text = decoder.decode(chunk, { stream: true })
    let start = 0
    let nl: number
    while ((nl = text.indexOf('\n', start)) >= 0) {
      let line = text.slice(start, nl)
      start = nl + 1
      if (parts.length > 0) {
        line = parts.join('') + line
        parts = []
        partsLength = 0
      }
      if (line.endsWith('\r')) line = line.slice(0, -1)
      if (line === '') {
        if (hasData) yield ev
        ev = { event: 'message', data: '', id: '' }
        hasData = false
        continue
      }
      if (line.startsWith(':')) continue
      const colon = line.indexOf(':')
      const field = colon < 0 ? line : line.slice(0, colon)
      let value = colon < 0 ? '' : line.slice(colon + 1)
      if (value.startsWith(' ')) value = value.slice(1)
      if (field === 'event') ev.event = value
      else if (field === 'id') ev.id = value
      else if (field === 'data') {
        ev.data = hasData ? `${ev.data}\n${value}` : value
        hasData = true
      }
      if (ev.data.length > maxEventLength) throw eventTooLarge(status)
    }
    if (start < text.length) {
      parts.push(text.slice(start))
      partsLength += text.length - start
    }
    if (partsLength + ev.data.length > maxEventLength) throw eventTooLarge(status)
    quiet.arm()
  }
  quiet.disarm()
}

function eventTooLarge(status: number): UnexpectedResponseError {
  return new UnexpectedResponseError(
    `conch: the log stream sent an event over ${maxEventLength} characters, larger than any of the API`, status,
  )
}

export async function* streamLogs(
  t: HttpTransport, id: string, options: StreamLogsOptions,
): AsyncGenerator<StreamLogEvent> {
  const outer = options.signal
  const limit = options.limit
  if (limit !== undefined && !(typeof limit === 'number' && Number.isInteger(limit) && limit >= 0) && !outer?.aborted) {
    // Refused as a page's ?limit= is (logs), and before any request: a
    // negative one ended the stream after one frame, a fraction after the
    // next whole number.
    yield { type: 'error', error: new InvalidArgumentError(`limit ${JSON.stringify(String(limit))}: want a non-negative integer`) }
    return
  }
  const stop = new AbortController()
  const onAbort = (): void => stop.abort()
  // A signal aborted already fires no abort event: it ends the stream before it starts.
  if (outer?.aborted) stop.abort()
  else outer?.addEventListener('abort', onAbort)
  let last = options.cursor
  let count = 0
  let failures = 0
  let stated = false
  let opened = false // a connection of this stream was answered with its events: what comes next is a resume
  try {
    while (!stop.signal.aborted) {
      let lastError: unknown
      let pause = 0
      // This connection: ended with the stream, or by quiet when the daemon
      // sent nothing, not even its heartbeat, for streamIdleTimeout.
      const conn = new AbortController()
      const endConn = (): void => conn.abort()
      stop.signal.addEventListener('abort', endConn)
      const quiet = new Quiet(t.streamIdleTimeout, endConn)
      try {
        const headers: Record<string, string> = last ? { 'last-event-id': last } : {}
        quiet.arm()
        const res = await t.request('GET', `/v1/processes/${seg(id)}/logs/stream`, {
          query: { cursor: last, encoding: options.encoding }, headers, signal: conn.signal,
        })
        quiet.disarm()
        if (res.status === 204) {
          // Resumed at or past the last frame of an ended process: nothing
          // more will come. The events a cut took are given as an uncut
          // stream would have: the state (the same WaitResult as a wait's),
          // then eof.
          const at = last ? { cursor: last } : {}
          if (!stated) {
            const result = await waitUntil(t, id, Infinity, stop.signal)
            if (result) yield { type: 'state', ...at, result }
          }
          yield { type: 'eof', ...at }
          return
        }
        if (!res.body) throw new TypeError('conch: the log stream has no body')
        opened = true
        for await (const raw of parse(res.body, quiet, res.status)) {
          // Events of a chunk already received come on after an abort:
          // the stream ends at the abort, not at the chunk's end.
          if (stop.signal.aborted) return
          failures = 0
          const ev = toEvent(raw, last, res.status)
          if (ev === undefined) continue
          if (ev.type === 'log') {
            // An event without a cursor leaves the last one: a resume from
            // none would start again from the first frame kept.
            if (ev.cursor) last = ev.cursor
            count++
          } else if (ev.type === 'state') stated = true
          yield ev
          if (ev.type === 'eof' || (ev.type === 'log' && options.limit && count >= options.limit)) return
        }
      } catch (err) {
        if (stop.signal.aborted) return
        if (quiet.fired) {
          // A daemon that sent nothing, not even its heartbeat, for that
          // long is frozen or gone: the stream ends now rather than waiting
          // as long again on a new connection (a refused or dropped one, as
          // a restart makes, is tried again below).
          const error = new DeadlineExceededError(
            `conch: the log stream of ${id}: nothing from ${t.url}, not even a heartbeat, within ${t.streamIdleTimeout} ms`,
            { cause: err },
          )
          yield { type: 'error', ...(last ? { cursor: last } : {}), error }
          return
        }
        // A first request that fails (refused, not sent, no answer in time)
        // is an error at once, as any other call's is. On a resume, one that
        // cannot be sent (the daemon restarting) and a 429 (the daemon at
        // its stream limit), a proxy's 502 or 504, or a 503 (with
        // Retry-After) may pass: they are tried again as a dropped
        // connection is; any other answer (the process is gone), or none in
        // time (status 0), will not change.
        if (!opened || (err instanceof ConchError && !passing.has(err.status))) {
          const error = err instanceof Error ? err : new Error(String(err))
          yield { type: 'error', ...(last ? { cursor: last } : {}), error }
          return
        }
        if (err instanceof ConchError && err.retryAfter !== undefined) pause = Math.min(err.retryAfter * 1000, maxPause)
        lastError = err
      } finally {
        quiet.disarm()
        stop.signal.removeEventListener('abort', endConn)
        conn.abort()
      }
      if (stated) {
        // The daemon sends state once every frame has been sent: only eof
        // was left, and a stream asked again without a cursor (the process
        // wrote nothing) would be sent the state a second time.
        yield { type: 'eof', ...(last ? { cursor: last } : {}) }
        return
      }
      if (++failures > maxRetries) {
        const error = lastError instanceof Error ? lastError : new Error('conch: the log stream ended before its eof')
        yield { type: 'error', ...(last ? { cursor: last } : {}), error }
        return
      }
      await sleep(Math.max(50 * 2 ** (failures - 1), pause), stop.signal)
    }
  } finally {
    outer?.removeEventListener('abort', onAbort)
    stop.abort()
  }
}

/**
 * The StreamLogEvent of a raw event of a stream answered with status;
 * undefined for one the SDK does not know.
 */
function toEvent(raw: RawEvent, last: string | undefined, status: number): StreamLogEvent | undefined {
  let data: unknown
  try {
    data = raw.data === '' ? {} : JSON.parse(raw.data)
  } catch {
    return undefined
  }
  if (!isRecord(data)) return undefined
  const at = last ? { cursor: last } : {}
  switch (raw.event) {
    case 'log': {
      // Its fields of another type made strings, as in an answer's logs.
      const frame = toFrame(data)!
      return { type: 'log', cursor: raw.id || frame.cursor, frame }
    }
    case 'warning': {
      const ev: StreamLogEvent = { type: 'warning', ...at, message: typeof data.message === 'string' ? data.message : '' }
      if (typeof data.firstAvailableCursor === 'string') ev.firstAvailableCursor = data.firstAvailableCursor
      return ev
    }
    case 'state':
      return { type: 'state', ...at, result: toWaitResult(data, status) }
    case 'eof':
      return { type: 'eof', ...at }
  }
  return undefined
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve()
    const done = (): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done)
  })
}
