// ProcessHandle: one process of the daemon, by id, without a request until
// a method is called.

import { openDuplex, type PtyDuplex } from './duplex.js'
import { DeadlineExceededError, UnexpectedResponseError, UnsupportedOperationError } from './errors.js'
import { record, toLogsPage, toProcess, toWaitResult } from './normalize.js'
import { answer, deadlineOf, notNegative, pause, waitUntil, window } from './run.js'
import { streamLogs } from './sse.js'
import { answerMargin, type HttpTransport, inputOf, maxWaitWindow, seg, stopGrace, stopWait } from './transport.js'
import type {
  InteractOptions, InteractResult, KillOptions, LogsOptions, LogsPage, ProcessDto, ProcessHandleJSON, ProcessKind,
  ReadyOptions, ReadyResult, StreamLogEvent, StreamLogsOptions, WaitProcessOptions, WaitResult,
} from './types.js'

export class ProcessHandle {
  readonly id: string
  readonly sandboxId: string
  readonly kind?: ProcessKind
  readonly #t: HttpTransport
  readonly #path: string

  constructor(transport: HttpTransport, sandboxId: string, processId: string, kind?: ProcessKind) {
    this.#t = transport
    this.sandboxId = sandboxId
    this.id = processId
    if (kind !== undefined) this.kind = kind
    this.#path = `/v1/processes/${seg(processId)}`
  }

  /** Attaches to a PTY process: its output (retained, then live) and its input. */
  async attach(): Promise<PtyDuplex> {
    try {
      return await openDuplex(this.#t, this.id)
    } catch (err) {
      // A daemon that did not answer the upgrade would not answer this.
      if (err instanceof DeadlineExceededError) throw err
      // A refused upgrade says only its status; the process says why, when
      // it can (gone, a wrong token, not a PTY). Else err stands: the error
      // of that status (a proxy's 502), or the WebSocket's own.
      const p = await this.get()
      if (p.kind !== 'pty') throw new UnsupportedOperationError(`attach to process ${this.id} of kind ${p.rawKind}: not a PTY`)
      throw err
    }
  }

  /**
   * Delete the process and its logs, stopping it first if it is running.
   * Refused (`UnsupportedOperationError`) for a running code cell, and for a
   * session command that has not stopped within 5 s: delete its session.
   */
  async delete(): Promise<void> {
    await this.#t.json('DELETE', this.#path, { timeout: this.#t.requestTimeout + stopWait })
  }

  async get(): Promise<ProcessDto> {
    const { status, body } = await this.#t.json('GET', this.#path)
    return toProcess(body, status)
  }

  /**
   * Sends a signal (TERM by default) to the process and its descendants,
   * escalating if asked. The kill of a session or code context answers once
   * it has ended, which may take escalateAfter (5 s when not given) and 5 s
   * more: that is waited for beyond requestTimeout.
   */
  async kill(options: KillOptions = {}): Promise<void> {
    const after = options.escalateAfter
    const hold = (typeof after === 'number' && after > 0 && Number.isFinite(after) ? after : stopGrace) + stopGrace
    await this.#t.json('POST', `${this.#path}/kill`, { json: options, timeout: this.#t.requestTimeout + hold })
  }

  /** One page of retained frames after `cursor`. */
  async logs(options: LogsOptions = {}): Promise<LogsPage> {
    const { status, body } = await this.#t.json('GET', `${this.#path}/logs`, {
      query: { cursor: options.cursor, limit: options.limit, encoding: options.encoding },
    })
    return toLogsPage(body, status)
  }

  async resize(cols: number, rows: number): Promise<void> {
    await this.#t.json('POST', `${this.#path}/resize`, { json: { cols, rows } })
  }

  /** Write stdin to an exec or pty process created with stdin='open'. */
  async stdin(data: string | Uint8Array, options: { eof?: boolean } = {}): Promise<void> {
    await this.#t.json('POST', `${this.#path}/stdin`, {
      body: inputOf(data), query: { eof: options.eof ? 'true' : undefined },
      headers: { 'content-type': 'application/octet-stream' },
    })
  }

  /** Close stdin for an exec or pty process. */
  async stdinEof(): Promise<void> {
    await this.stdin('', { eof: true })
  }

  /**
   * The process's log, state and eof events as they come; a dropped
   * connection resumes after the last frame yielded.
   */
  streamLogs(options: StreamLogsOptions = {}): AsyncIterable<StreamLogEvent> {
    return streamLogs(this.#t, this.id, options)
  }

  toJSON(): ProcessHandleJSON {
    const j: ProcessHandleJSON = { sandboxId: this.sandboxId, processId: this.id }
    if (this.kind !== undefined) j.kind = this.kind
    return j
  }

  /**
   * Waits for the process to end. When `timeout` runs out first, resolves with
   * `reason: 'timed_out'`, `rawReason: 'wait_timeout'`: the process goes on.
   */
  async wait(options: WaitProcessOptions = {}): Promise<WaitResult> {
    const result = await waitUntil(this.#t, this.id, deadlineOf(options.timeout), options.signal)
    return result ?? { reason: 'timed_out', rawReason: 'wait_timeout' }
  }

  /**
   * Writes input (or sends a signal), then waits as a run does and answers
   * with the output after `cursor`: the RunResult once the process ended,
   * else the output so far with `running: true`.
   */
  async interact(options: InteractOptions = {}): Promise<InteractResult> {
    const { input, ...rest } = options
    // Refused here, as a run's timeout is: the daemon would refuse a
    // negative one, and a NaN, sent as null, would be no timeout at all.
    notNegative('a timeout', options.timeout)
    notNegative('an idleTimeout', options.idleTimeout)
    const body: Record<string, unknown> = { ...rest }
    if (input !== undefined) {
      const data = inputOf(input)
      if (typeof data === 'string') body.input = data
      else body.inputBase64 = Buffer.from(data).toString('base64')
    }
    // One request, bounded by the wait it asks for. Node's fetch gives up
    // on an answer after 300 s: a longer wait, or none (as long as the
    // process runs), is asked for maxWaitWindow, and a process still
    // running then comes back running, with next to ask again from, rather
    // than as a failed fetch.
    const wait = typeof options.timeout === 'number' && options.timeout > 0 ? Math.min(Math.ceil(options.timeout), maxWaitWindow) : maxWaitWindow
    body.timeout = wait
    const { status, body: w } = await this.#t.json('POST', `${this.#path}/interact`, { json: body, timeout: wait + answerMargin })
    return answer(status, record(w, 'interact', status))
  }

  /**
   * Waits until the process listens on `port` or its
   * output matches `pattern`; `ready: false` with its result if it ended
   * first, or with `timed_out` / `wait_timeout` when `timeout` ran out.
   */
  async ready(options: ReadyOptions = {}): Promise<ReadyResult> {
    const deadline = deadlineOf(options.timeout)
    for (;;) {
      const timeout = window(this.#t, deadline)
      const began = Date.now()
      const { status, body } = await this.#t.json('GET', `${this.#path}/ready`, {
        query: { port: options.port, pattern: options.pattern, timeout }, timeout: timeout + answerMargin,
        ...(options.signal ? { signal: options.signal } : {}),
      })
      if (status === 200) {
        const b = record(body, 'ready', status)
        if (b.ready === true) return b as ReadyResult
        return { ...b, ready: false, result: toWaitResult(record(b.result, 'ready result', status), status) }
      }
      if (status !== 202) throw new UnexpectedResponseError(`conch: ready: an answer that is not the API's (HTTP ${status})`, status)
      // A 202 that came before its window passed (not the daemon's) is
      // asked again only once it passed, not at once, for ever.
      const soon = Math.min(began + timeout, deadline) - Date.now()
      if (soon > 0) await pause(soon, options.signal)
      options.signal?.throwIfAborted()
      if (Date.now() >= deadline) return { ready: false, result: { reason: 'timed_out', rawReason: 'wait_timeout' } }
    }
  }
}
