// ProcessHandle: one process of the daemon, by id, without a request until
// a method is called.

import { openDuplex, type PtyDuplex } from './duplex.js'
import { UnsupportedOperationError } from './errors.js'
import { toLogsPage, toProcess } from './normalize.js'
import { deadlineOf, waitUntil } from './run.js'
import { streamLogs } from './sse.js'
import { type HttpTransport, seg } from './transport.js'
import type {
  KillOptions, LogsOptions, LogsPage, ProcessDto, ProcessHandleJSON, ProcessKind, StreamLogEvent,
  StreamLogsOptions, WaitProcessOptions, WaitResult,
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
      // A refused upgrade says only its status; the process says why.
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
    await this.#t.json('DELETE', this.#path)
  }

  async get(): Promise<ProcessDto> {
    const { body } = await this.#t.json('GET', this.#path)
    return toProcess(body)
  }

  /** Sends a signal (TERM by default) to the process and its descendants, escalating if asked. */
  async kill(options: KillOptions = {}): Promise<void> {
    await this.#t.json('POST', `${this.#path}/kill`, { json: options })
  }

  /** One page of retained frames after `cursor`. */
  async logs(options: LogsOptions = {}): Promise<LogsPage> {
    const { body } = await this.#t.json('GET', `${this.#path}/logs`, {
      query: { cursor: options.cursor, limit: options.limit, encoding: options.encoding },
    })
    return toLogsPage(body)
  }

  async resize(cols: number, rows: number): Promise<void> {
    await this.#t.json('POST', `${this.#path}/resize`, { json: { cols, rows } })
  }

  /** Write stdin to an exec or pty process created with stdin='open'. */
  async stdin(data: string | Uint8Array, options: { eof?: boolean } = {}): Promise<void> {
    await this.#t.json('POST', `${this.#path}/stdin`, {
      body: data, query: { eof: options.eof ? 'true' : undefined },
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
}
