// ProcessService and PtyService: starting, running, listing and rebinding
// processes and sessions.

import type { PtyDuplex } from './duplex.js'
import { ProcessHandle } from './handle.js'
import { toProcess, toProcessList } from './normalize.js'
import { run } from './run.js'
import { Session } from './session.js'
import { type HttpTransport, seg, sessionReadyLimit, typeName } from './transport.js'
import type {
  CreateSessionOptions, ListResult, ProcessCommand, ProcessDto, ProcessHandleJSON, ProcessKind,
  ProcessListOptions, ProcessStartOptions, RunOptions, RunResult, SessionJSON, TerminalSize,
} from './types.js'

/** What a Session is bound to: the transport and the sandbox it reaches. */
export interface ProcessBinding {
  readonly transport: HttpTransport
  readonly sandboxId: string
}

/** The body fields of a command. */
function commandFields(command: ProcessCommand): { cmd?: string; argv?: readonly string[] } {
  if (typeof command === 'string') return { cmd: command }
  const c = command as { cmd?: unknown; argv?: unknown } | null | undefined
  if (typeof c === 'object' && c !== null && !Array.isArray(c)) {
    const { argv, cmd } = c
    if (argv !== undefined && cmd === undefined && Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === 'string')) {
      return { argv: argv as readonly string[] }
    }
    if (argv === undefined && typeof cmd === 'string') return { cmd }
  }
  throw new TypeError(`conch: a command is a shell string, { cmd: string } or { argv: [string, ...] }, not ${typeName(command)}`)
}

function kindOf(dto: ProcessDto): ProcessKind | undefined {
  return dto.kind === 'unknown' ? undefined : dto.kind
}

export class ProcessService implements ProcessBinding {
  readonly transport: HttpTransport
  readonly sandboxId: string

  constructor(transport: HttpTransport, sandboxId: string) {
    this.transport = transport
    this.sandboxId = sandboxId
  }

  connect(idOrHandle: string | ProcessHandleJSON): ProcessHandle {
    if (typeof idOrHandle === 'string') return new ProcessHandle(this.transport, this.sandboxId, idOrHandle)
    return new ProcessHandle(this.transport, this.sandboxId, idOrHandle.processId, idOrHandle.kind)
  }

  /** Rebind a shell session by id or serialized identity, without a request. */
  connectSession(sessionIdOrJSON: string | SessionJSON): Session {
    const id = typeof sessionIdOrJSON === 'string' ? sessionIdOrJSON : sessionIdOrJSON.sessionId
    return new Session(this, id)
  }

  /** Create one persistent shell. Set its cwd/env here, not on its commands. */
  async createSession(options: CreateSessionOptions = {}): Promise<Session> {
    const timeout = this.transport.requestTimeout + sessionReadyLimit
    const { status, body } = await this.transport.json('POST', '/v1/sessions', { json: options, timeout })
    return new Session(this, toProcess(body, status).id)
  }

  async get(id: string): Promise<ProcessDto> {
    const { status, body } = await this.transport.json('GET', `/v1/processes/${seg(id)}`)
    return toProcess(body, status)
  }

  async list(options: ProcessListOptions = {}): Promise<ListResult<ProcessDto>> {
    const { status, body } = await this.transport.json('GET', '/v1/processes', { query: { ...options } })
    return toProcessList(body, status)
  }

  /**
   * Run a command, wait for its shell to exit, and collect its output.
   * Normally one round trip; a process outliving the daemon's wait window, or
   * output an answer left out, falls back to waits and log pages. When
   * `timeout` runs out first the result is `timed_out` / `wait_timeout`, with
   * the first pages of output, and the process goes on.
   */
  async run(command: ProcessCommand, options: RunOptions = {}): Promise<RunResult> {
    const { timeout, signal, ...rest } = options
    return run(this.transport, '/v1/processes/run', { ...rest, ...commandFields(command) }, timeout, signal)
  }

  /** Start a detached process and return a handle immediately. */
  async start(command: ProcessCommand, options: ProcessStartOptions = {}): Promise<ProcessHandle> {
    return startProcess(this, { ...options, ...commandFields(command) })
  }
}

/** Starts a process from a full body: exec for ProcessService, pty for PtyService. */
async function startProcess(b: ProcessBinding, body: Record<string, unknown>): Promise<ProcessHandle> {
  const { status, body: answer } = await b.transport.json('POST', '/v1/processes', { json: body })
  const dto = toProcess(answer, status)
  return new ProcessHandle(b.transport, b.sandboxId, dto.id, kindOf(dto))
}

type PtyOptions = Omit<ProcessStartOptions, 'cmd'> & { terminal?: TerminalSize }

export class PtyService {
  readonly #process: ProcessService

  constructor(process: ProcessService) {
    this.#process = process
  }

  /**
   * Starts a PTY process and attaches to it. When the attach fails (a refused
   * handshake: a proxy that does not pass upgrades), the process it started
   * is deleted before the error is thrown: the caller never had its handle.
   */
  async attach(command?: string, options: PtyOptions = {}): Promise<{ handle: ProcessHandle; connection: PtyDuplex }> {
    const handle = await this.start(command, options)
    try {
      const connection = await handle.attach()
      return { handle, connection }
    } catch (err) {
      await handle.delete().catch(() => {}) // the attach's error says what went wrong
      throw err
    }
  }

  connect(idOrHandle: string | ProcessHandleJSON): ProcessHandle {
    if (typeof idOrHandle === 'string') return this.#process.connect({ sandboxId: this.#process.sandboxId, processId: idOrHandle, kind: 'pty' })
    return this.#process.connect(idOrHandle)
  }

  async delete(idOrHandle: string | ProcessHandleJSON): Promise<void> {
    await this.connect(idOrHandle).delete()
  }

  async list(): Promise<ListResult<ProcessDto>> {
    return this.#process.list({ kind: 'pty' })
  }

  /** Starts a PTY process running command, or the shell when there is none. */
  async start(command?: string, options: PtyOptions = {}): Promise<ProcessHandle> {
    const body: Record<string, unknown> = { ...options, kind: 'pty' }
    if (command !== undefined) body.cmd = command
    return startProcess(this.#process, body)
  }
}
