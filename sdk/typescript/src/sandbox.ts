// Sandbox: the entry point, one daemon with its process and pty services.

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

  /** Same as `process.run`. */
  exec(command: ProcessCommand, options: RunOptions = {}): Promise<RunResult> {
    return this.process.run(command, options)
  }

  /**
   * The daemon of this user: `CONCH_URL` and `CONCH_TOKEN` when set, else what
   * `conch serve` recorded in its state directory ($XDG_STATE_HOME/conch, or
   * ~/.local/state/conch): daemon.json and the token file it names.
   */
  static async fromEnv(options: Partial<SandboxOptions> = {}): Promise<Sandbox> {
    const env = process.env
    let url = options.url ?? env.CONCH_URL
    let token = options.token ?? env.CONCH_TOKEN
    if (url === undefined || token === undefined) {
      const found = await discover(env)
      url ??= found.url
      token ??= found.token
    }
    return new Sandbox({ ...options, url, token })
  }
}

async function discover(env: NodeJS.ProcessEnv): Promise<{ url: string; token: string }> {
  const { readFile } = await import('node:fs/promises')
  const { homedir } = await import('node:os')
  const { isAbsolute, join } = await import('node:path')
  const xdg = env.XDG_STATE_HOME
  const dir = xdg && isAbsolute(xdg) ? join(xdg, 'conch') : join(homedir(), '.local', 'state', 'conch')
  let url = 'http://127.0.0.1:7070'
  let tokenFile = join(dir, 'token')
  try {
    const ep: unknown = JSON.parse(await readFile(join(dir, 'daemon.json'), 'utf8'))
    if (typeof ep === 'object' && ep !== null) {
      const e = ep as { url?: unknown; tokenFile?: unknown }
      if (typeof e.url === 'string' && e.url) url = e.url
      if (typeof e.tokenFile === 'string' && e.tokenFile) tokenFile = e.tokenFile
    }
  } catch {
    // no daemon recorded: the default address and token file
  }
  let token: string
  try {
    token = (await readFile(tokenFile, 'utf8')).trim()
  } catch (err) {
    throw new Error(
      `no conch daemon found: CONCH_URL and CONCH_TOKEN are not set, and ${tokenFile} cannot be read ` +
        `(${(err as NodeJS.ErrnoException).code ?? String(err)}); start one with \`conch serve\` ` +
        `(it records itself in ${dir}), or set CONCH_URL and CONCH_TOKEN`,
      { cause: err },
    )
  }
  return { url, token }
}
