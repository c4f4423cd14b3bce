// Session: one persistent shell of the daemon, by id.

import { NotFoundError } from './errors.js'
import { ProcessHandle } from './handle.js'
import { toProcess } from './normalize.js'
import { run } from './run.js'
import type { ProcessBinding } from './service.js'
import { seg, stopWait, typeName } from './transport.js'
import type {
  CodeRunOptions, CodeStartOptions, ProcessDto, ProcessKind, RunResult, SessionJSON, SessionRunOptions, SessionStartOptions,
} from './types.js'

/**
 * One persistent shell. Commands run one at a time, in order; `cd`, exports,
 * and functions carry over. Set cwd/env with `process.createSession()`.
 * Interrupt a command with `handle.kill({ signal: 'INT' })`: the session
 * survives.
 */
export class Session {
  readonly sandboxId: string
  readonly id: string
  readonly #b: ProcessBinding
  readonly #path: string

  constructor(binding: ProcessBinding, id: string) {
    this.#b = binding
    this.sandboxId = binding.sandboxId
    this.id = id
    this.#path = `/v1/sessions/${seg(id)}`
  }

  /** Deletes the session on scope exit; one already deleted in the scope is fine. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.delete()
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err
    }
  }

  /** End the shell and delete it and all its command records. */
  async delete(): Promise<void> {
    await this.#b.transport.json('DELETE', this.#path, { timeout: this.#b.transport.requestTimeout + stopWait })
  }

  /** Read the shell process, including its current working directory. */
  async get(): Promise<ProcessDto> {
    const { status, body } = await this.#b.transport.json('GET', this.#path)
    return toProcess(body, status)
  }

  /** Run in this shell, wait, and collect output using the process run path. */
  async run(command: string, options: SessionRunOptions = {}): Promise<RunResult> {
    const { timeout, signal, ...rest } = options
    return run(this.#b.transport, `${this.#path}/commands/run`, { ...rest, cmd: text('a session command', command) }, timeout, signal)
  }

  /** Queue a command and return its handle without waiting for completion. */
  async start(command: string, options: SessionStartOptions = {}): Promise<ProcessHandle> {
    return this.#submit({ ...options, cmd: text('a session command', command) })
  }

  /** Runs a cell in this code context, waits, and collects its output. */
  async runCode(code: string, options: CodeRunOptions = {}): Promise<RunResult> {
    const { timeout, signal, ...rest } = options
    return run(this.#b.transport, `${this.#path}/commands/run`, { ...rest, code: text("a cell's code", code) }, timeout, signal)
  }

  /** Queues a cell in this code context and returns its handle. */
  async startCode(code: string, options: CodeStartOptions = {}): Promise<ProcessHandle> {
    return this.#submit({ ...options, code: text("a cell's code", code) })
  }

  async #submit(body: Record<string, unknown>): Promise<ProcessHandle> {
    const { status, body: answer } = await this.#b.transport.json('POST', `${this.#path}/commands`, { json: body })
    const dto = toProcess(answer, status)
    const kind: ProcessKind | undefined = dto.kind === 'unknown' ? undefined : dto.kind
    return new ProcessHandle(this.#b.transport, this.sandboxId, dto.id, kind)
  }

  toJSON(): SessionJSON {
    return { sandboxId: this.sandboxId, sessionId: this.id }
  }
}

/** text, a session command's or a cell's, checked: a string, never undefined sent as an empty one. */
function text(what: string, text: unknown): string {
  if (typeof text !== 'string') throw new TypeError(`conch: ${what} is a string, not ${typeName(text)}`)
  return text
}
