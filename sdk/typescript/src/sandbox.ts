// Sandbox: the entry point, one daemon with its process and pty services.

import { UnexpectedResponseError } from './errors.js'
import { ProcessService, PtyService } from './service.js'
import { HttpTransport, type HttpTransportOptions } from './transport.js'
import type { ProcessCommand, RunOptions, RunResult } from './types.js'

export interface SandboxOptions extends HttpTransportOptions {
  /** Labels the daemon in every toJSON(); "local" by default. */
  sandboxId?: string
}

export class Sandbox {
  readonly sandboxId: string
  readonly transport: HttpTransport
  readonly process: ProcessService
  readonly pty: PtyService

  constructor(options: SandboxOptions) {
    this.sandboxId = options.sandboxId ?? 'local'
    this.transport = new HttpTransport(options)
    this.process = new ProcessService(this.transport, this.sandboxId)
    this.pty = new PtyService(this.process)
  }

  /**
   * The daemon's `GET /healthz` answer (`status`, `version`, `containment`,
   * `budgets`, ...; see docs/api.md). The route needs no token.
   */
  async health(): Promise<Record<string, unknown>> {
    const { status, body } = await this.transport.json('GET', '/healthz')
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new UnexpectedResponseError(`conch: GET /healthz answered HTTP ${status} with no JSON object`, status)
    }
    return body as Record<string, unknown>
  }

  /** Same as `process.run`. */
  exec(command: ProcessCommand, options: RunOptions = {}): Promise<RunResult> {
    return this.process.run(command, options)
  }

  /**
   * The daemon of this user: `CONCH_URL` and `CONCH_TOKEN` when set, else what
   * `conch serve` recorded in its state directory ($XDG_STATE_HOME/conch, or
   * ~/.local/state/conch): daemon.json and the token file it names. Each is
   * looked up on its own: `CONCH_TOKEN` alone reaches the daemon recorded
   * there (one started with `CONCH_TOKEN` records no token file).
   */
  static async fromEnv(options: Partial<SandboxOptions> = {}): Promise<Sandbox> {
    const env = process.env
    let url = options.url ?? given(env.CONCH_URL)
    let token = options.token ?? given(env.CONCH_TOKEN?.trim()) // a line's end read with it is no part of it
    if (url === undefined || token === undefined) {
      const found = await discover(env, token === undefined)
      url ??= found.url
      token ??= found.token!
    }
    return new Sandbox({ ...options, url, token })
  }
}

/** An environment variable's value; empty is unset, as for the Go client. */
function given(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v
}

/**
 * What `conch serve` recorded: its URL (the default address when none is),
 * and, when needToken, the token from the token file it names (the state
 * directory's by default), as client/discover.go finds them.
 */
async function discover(env: NodeJS.ProcessEnv, needToken: boolean): Promise<{ url: string; token?: string }> {
  const { homedir } = await import('node:os')
  const { isAbsolute, join } = await import('node:path')
  const xdg = env.XDG_STATE_HOME
  const dir = xdg && isAbsolute(xdg) ? join(xdg, 'conch') : join(homedir(), '.local', 'state', 'conch')
  let recorded: { url?: string; tokenFile?: string; pid?: number } = {}
  try {
    const ep: unknown = JSON.parse(await readStateFile(join(dir, 'daemon.json')))
    if (typeof ep === 'object' && ep !== null) {
      const e = ep as { url?: unknown; tokenFile?: unknown; pid?: unknown }
      if (typeof e.url === 'string' && e.url) recorded.url = e.url
      if (typeof e.tokenFile === 'string' && e.tokenFile) recorded.tokenFile = e.tokenFile
      if (typeof e.pid === 'number' && Number.isInteger(e.pid) && e.pid > 0) recorded.pid = e.pid
    }
  } catch {
    recorded = {} // no daemon recorded: the default address and token file
  }
  const url = recorded.url ?? 'http://127.0.0.1:7070'
  if (!needToken) return { url }
  if (recorded.url !== undefined && recorded.tokenFile === undefined) {
    if (!(await running(dir, recorded.pid))) {
      // Killed before it could take its record back: setting CONCH_TOKEN
      // would not reach it.
      throw new Error(
        `the conch daemon recorded in ${dir} (${recorded.url}, pid ${recorded.pid ?? 0}) is no longer running: ` +
          'start one with `conch serve`, or set CONCH_URL and CONCH_TOKEN',
      )
    }
    throw new Error(
      `the conch daemon at ${recorded.url} (recorded in ${dir}) took its token from CONCH_TOKEN ` +
        'and wrote no token file: set CONCH_TOKEN here too',
    )
  }
  const tokenFile = recorded.tokenFile ?? join(dir, 'token')
  let token: string
  try {
    token = (await readStateFile(tokenFile)).trim()
  } catch (err) {
    if (recorded.pid !== undefined && (await running(dir, recorded.pid))) {
      // Starting another, as said below, would be refused: this one runs.
      // The conch CLI says the same.
      throw new Error(
        `the conch daemon recorded in ${join(dir, 'daemon.json')} (pid ${recorded.pid}) runs, but its token file ` +
          `${tokenFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)}): set CONCH_TOKEN ` +
          'to its token, or stop it and start it again with `conch serve`, which writes a new one',
        { cause: err },
      )
    }
    throw new Error(
      `no conch daemon found: CONCH_TOKEN is not set, and ${tokenFile} cannot be read ` +
        `(${(err as NodeJS.ErrnoException).code ?? String(err)}); start one with \`conch serve\` ` +
        `(it records itself in ${dir}), or set CONCH_URL and CONCH_TOKEN`,
      { cause: err },
    )
  }
  if (token === '') {
    // Every request would be refused (401): say so here, as the Go client
    // and the Python SDK do.
    throw new Error(`the conch token file ${tokenFile} is empty: set CONCH_TOKEN, or restart \`conch serve\``)
  }
  return { url, token }
}

/**
 * Whether the daemon daemon.json names by pid runs, by the rule of the Go
 * client (internal/daemonrec). Each running daemon records its instance in
 * instances/ID.json of the state directory: its pid, when that pid started,
 * the boot and the pid namespace. A pid alone does not tell: a daemon
 * killed before it took its records back leaves its pid to a zombie, or to
 * whatever process the kernel gives it next. It runs while an instance
 * record of this pid namespace names its pid, and that pid is held, in the
 * same boot, by a process (not a zombie) that started when the record says.
 */
async function running(dir: string, pid: number | undefined): Promise<boolean> {
  const { readdir, readFile, readlink } = await import('node:fs/promises')
  const { join } = await import('node:path')
  if (pid === undefined || pid <= 0) return false
  const names = await readdir(join(dir, 'instances')).catch(() => [] as string[])
  for (const name of names) {
    if (!name.endsWith('.json')) continue
    let rec: { pid?: unknown; startTime?: unknown; bootId?: unknown; pidNamespace?: unknown }
    try {
      rec = JSON.parse(await readStateFile(join(dir, 'instances', name)))
    } catch {
      continue // removed meanwhile, not whole, or not a record
    }
    if (typeof rec !== 'object' || rec === null || rec.pid !== pid) continue
    const pidNamespace = await readlink('/proc/self/ns/pid').catch(() => '')
    const bootId = await readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((b) => b.trim(), () => '')
    if ((rec.pidNamespace ?? '') === pidNamespace && (rec.bootId ?? '') === bootId && (rec.startTime ?? 0) === (await startTime(pid))) {
      return true
    }
  }
  return false
}

/** What is read of a state file at most, as the Go client reads (statefile.MaxSize); each is a few hundred bytes. */
const maxStateFileSize = 64 << 10

/**
 * The state file at path (daemon.json, the token, an instance record),
 * never waiting and never reading much: anything else found at its name,
 * which any command the daemon runs can put there, is refused (thrown): a
 * FIFO (which, opened as usual, would wait for a writer for ever), a
 * directory, a device, and a file larger than maxStateFileSize.
 */
async function readStateFile(path: string): Promise<string> {
  const { open } = await import('node:fs/promises')
  const { constants } = await import('node:fs')
  // O_NONBLOCK: opening a FIFO returns at once, to be refused below.
  const file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    if (!(await file.stat()).isFile()) throw new Error(`${path} is not a regular file`)
    // One byte past the bound tells a file that grew since its stat.
    const buf = Buffer.alloc(maxStateFileSize + 1)
    let n = 0
    for (;;) {
      const { bytesRead } = await file.read(buf, n, buf.length - n)
      if (bytesRead === 0) break
      n += bytesRead
      if (n === buf.length) throw new Error(`${path} is larger than a state file can be`)
    }
    return buf.toString('utf8', 0, n)
  } finally {
    await file.close()
  }
}

/** When process pid started, in clock ticks after boot (field 22 of /proc/PID/stat); undefined for a zombie or no process. */
async function startTime(pid: number): Promise<number | undefined> {
  const { readFile } = await import('node:fs/promises')
  let stat: string
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // The command name, in parentheses, may itself hold spaces and
  // parentheses: fields are counted from the last ')', the state first.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  if (fields.length < 20 || fields[0] === 'Z') return undefined
  const start = Number(fields[19])
  return Number.isInteger(start) ? start : undefined
}
