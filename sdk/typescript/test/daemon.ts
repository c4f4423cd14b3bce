// A real `conch serve` for the tests: built from the repository (or taken
// from CONCH_BIN, which scripts/test.sh builds once), started on a free
// loopback port with a temporary token and state directory of its own.

import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { rmSync } from 'node:fs'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

import { Sandbox, type SandboxOptions } from '@conchsh/sdk'

const repoRoot = resolve(fileURLToPath(import.meta.url), '../../../../..')

export interface Daemon {
  url: string
  token: string
  dir: string
  /** The daemon's process id (to stop or freeze it). */
  pid: number
  sandbox(options?: Partial<SandboxOptions>): Sandbox
  stop(): Promise<void>
}

/**
 * Freezes the process pid with SIGSTOP and waits until every one of its
 * threads is stopped: the signal reaches a process's threads one by one,
 * and a thread still running can answer a request sent meanwhile.
 */
export async function freeze(pid: number): Promise<void> {
  process.kill(pid, 'SIGSTOP')
  const deadline = Date.now() + 5000
  while (Date.now() < deadline) {
    const states: string[] = []
    for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [])) {
      const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '')
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]
      if (state) states.push(state)
    }
    if (states.length > 0 && states.every((st) => st === 'T' || st === 't')) return
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error(`process ${pid} did not stop`)
}

let built: Promise<string> | undefined

async function binary(): Promise<string> {
  if (process.env.CONCH_BIN) return process.env.CONCH_BIN
  built ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'conch-sdk-bin-'))
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
    const out = join(dir, 'conch')
    await promisify(execFile)('go', ['build', '-o', out, './cmd/conch'], { cwd: repoRoot })
    return out
  })()
  return built
}

/**
 * Starts a daemon with extra serve flags; the caller stops it. tokenFromEnv:
 * it takes its token from CONCH_TOKEN rather than a token file.
 */
export async function startDaemon(flags: string[] = [], options: { tokenFromEnv?: boolean } = {}): Promise<Daemon> {
  const bin = await binary()
  const dir = await mkdtemp(join(tmpdir(), 'conch-sdk-test-'))
  const token = 'test-token-' + Math.random().toString(36).slice(2)
  const tokenFile = join(dir, 'token')
  await writeFile(tokenFile, token, { mode: 0o600 })
  const tokenFlags = options.tokenFromEnv ? [] : ['--token-file', tokenFile]
  const child = spawn(bin, ['serve', '--listen', '127.0.0.1:0', ...tokenFlags, ...flags], {
    cwd: dir,
    env: { ...process.env, HOME: dir, XDG_STATE_HOME: join(dir, 'state'), CONCH_TOKEN: options.tokenFromEnv ? token : '' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  const url = await listening(child)
  return {
    url, token, dir, pid: child.pid!,
    sandbox: (options = {}) => new Sandbox({ url, token, ...options }),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGCONT') // one a test froze
        child.kill('SIGTERM')
        await exited
      }
      await rm(dir, { recursive: true, force: true })
    },
  }
}

/** The URL of the "conch: listening on URL" line of child's stderr. */
function listening(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = ''
    const timer = setTimeout(() => reject(new Error(`conch serve did not listen: ${buf}`)), 30_000)
    child.stderr!.setEncoding('utf8')
    child.stderr!.on('data', (s: string) => {
      buf += s
      const m = /conch: listening on (\S+)/.exec(buf)
      if (m) {
        clearTimeout(timer)
        resolve(m[1]!)
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`conch serve exited ${code}: ${buf}`))
    })
  })
}

/** A fetch that records each request's method, path and answer status. */
export function recordingFetch(): { fetch: typeof fetch; calls: { method: string; path: string; status: number }[] } {
  const calls: { method: string; path: string; status: number }[] = []
  const f: typeof fetch = async (input, init) => {
    const res = await fetch(input, init)
    const u = new URL(String(input))
    calls.push({ method: init?.method ?? 'GET', path: u.pathname + u.search, status: res.status })
    return res
  }
  return { fetch: f, calls }
}
