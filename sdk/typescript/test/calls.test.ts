// Request/response calls as an agent runtime makes them: the transport's
// bounds, input that UTF-8 cannot carry, and discovery from the state
// directory.

import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, constants, openSync } from 'node:fs'
import { appendFile, mkdir, mkdtemp, readFile, readlink, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import { Sandbox } from '@conchsh/sdk'

import { startDaemon, type Daemon } from './daemon.js'

describe('calls', { timeout: 120_000 }, () => {
  let d: Daemon
  before(async () => {
    d = await startDaemon()
  })
  after(async () => {
    await d.stop()
  })

  test('a requestTimeout of Infinity, or past what a timer holds, bounds no call rather than failing it at once', async () => {
    // Node fires a timer set past 2^31 - 1 ms after 1 ms.
    for (const requestTimeout of [Infinity, 2 ** 31, 2 ** 31 - 1 - 30_000]) {
      const s = d.sandbox({ requestTimeout })
      await s.process.list()
      const session = await s.process.createSession() // given 30 000 ms more
      assert.equal((await session.get()).id, session.id)
      await session.delete()
    }
  })

  test('health answers the daemon\'s /healthz, which needs no token', async () => {
    const h = await d.sandbox().health()
    assert.equal(h.status, 'ok')
    assert.equal(typeof h.version, 'string')
    const stranger = new Sandbox({ url: d.url, token: 'not-the-token' })
    assert.equal((await stranger.health()).status, 'ok')
    await assert.rejects(stranger.process.list(), (err: Error) => err.name === 'AuthenticationError')
  })

  test('input with a lone surrogate is refused before it is sent, not sent as U+FFFD', async () => {
    const s = d.sandbox()
    const h = await s.process.start('cat', { stdin: 'open' })
    try {
      await assert.rejects(h.stdin('a\ud800b'), (err: Error) => err instanceof TypeError && /lone surrogate/.test(err.message))
      await assert.rejects(h.interact({ input: '\udc00', timeout: 1 }), TypeError)
      // A pair is a character, sent as its four bytes.
      await h.stdin('ok \u{1F600}', { eof: true })
      const end = await h.wait({ timeout: 30_000 })
      assert.equal(end.reason, 'exited')
      const page = await h.logs()
      assert.equal(page.items.map((f) => f.data).join(''), 'ok \u{1F600}')
    } finally {
      await h.delete()
    }
  })
})

describe('Sandbox.fromEnv from the state directory', { timeout: 60_000 }, () => {
  let dir: string
  let state: string
  const saved = { ...process.env }
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'conch-sdk-discover-'))
    state = join(dir, 'conch')
    await mkdir(state)
    delete process.env.CONCH_URL
    delete process.env.CONCH_TOKEN
    process.env.XDG_STATE_HOME = dir
  })
  after(async () => {
    process.env = saved
    await rm(dir, { recursive: true, force: true })
  })

  test('an empty token file is refused, as the Go client and the Python SDK refuse it', async () => {
    const tokenFile = join(state, 'token')
    await writeFile(tokenFile, '\n', { mode: 0o600 })
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', tokenFile, pid: process.pid }))
    await assert.rejects(Sandbox.fromEnv(), (err: Error) => {
      assert.ok(err.message.includes(tokenFile) && /empty/.test(err.message), err.message)
      return true
    })
  })

  test('a FIFO at the token file or daemon.json is refused at once, never waited on', async () => {
    // Any command the daemon runs can put one there; read as a file, it
    // kept the SDK waiting for a writer for ever.
    const fifo = join(dir, 'fifo-token')
    execFileSync('mkfifo', [fifo])
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', tokenFile: fifo, pid: 1 }))
    await assert.rejects(Sandbox.fromEnv(), (err: Error) => {
      assert.ok(err.message.includes(`${fifo} is not a regular file`), err.message)
      return true
    })
    await rm(join(state, 'daemon.json'))
    execFileSync('mkfifo', [join(state, 'daemon.json')])
    await writeFile(join(state, 'token'), 'tok\n', { mode: 0o600 })
    await Sandbox.fromEnv() // no daemon recorded: the default address, the state directory's token
    await rm(join(state, 'daemon.json'))
    await rm(join(state, 'token'))
    await rm(fifo)
  })

  test('a running daemon whose token file is gone is said to run, not to be missing', async () => {
    // It said no daemon was found and to start one with `conch serve`,
    // which refuses to start beside it. The CLI says the daemon runs and
    // what to do.
    const tokenFile = join(dir, 'gone')
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', tokenFile, pid: process.pid }))
    await recordInstance(state, process.pid, await startTime(process.pid))
    await assert.rejects(Sandbox.fromEnv(), (err: Error) => {
      assert.ok(err.message.includes(`(pid ${process.pid}) runs, but its token file ${tokenFile} cannot be read (ENOENT)`), err.message)
      assert.match(err.message, /set CONCH_TOKEN to its token/)
      return true
    })
    // One that no longer runs: none is found, and one is to be started.
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
    await new Promise((r) => child.once('exit', r))
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', tokenFile, pid: child.pid }))
    await assert.rejects(Sandbox.fromEnv(), /no conch daemon found/)
    await rm(join(state, 'instances'), { recursive: true, force: true })
  })

  test('a daemon recorded without a token file that is no longer running is said to be gone, not to need CONCH_TOKEN', async () => {
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
    const pid = child.pid!
    await new Promise((r) => child.once('exit', r))
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', pid }))
    await assert.rejects(Sandbox.fromEnv(), (err: Error) => {
      assert.match(err.message, /no longer running/)
      assert.match(err.message, /conch serve/)
      return true
    })
    // One still running took its token from CONCH_TOKEN: that is what to set.
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', pid: process.pid }))
    await recordInstance(state, process.pid, await startTime(process.pid))
    await assert.rejects(Sandbox.fromEnv(), /set CONCH_TOKEN here too/)
  })

  test('what is not an instance record is skipped: a FIFO is not waited on, a large file not read', async () => {
    // A FIFO named as an instance record is skipped, not waited on for
    // ever, and so is a directory, and a file larger than a record can be
    // (64 KiB), even one that begins as the record of the daemon that
    // runs. Before, the FIFO hung fromEnv, as it hung the Go client, and
    // any file was read whole.
    const instances = join(state, 'instances')
    await rm(instances, { recursive: true, force: true })
    await mkdir(instances)
    await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', pid: process.pid }))
    const fifo = join(instances, 'a-fifo.json')
    execFileSync('mkfifo', [fifo])
    await mkdir(join(instances, 'b-dir.json'))
    const says = async (): Promise<string> => {
      const call = Sandbox.fromEnv().then(
        () => 'no error',
        (err: Error) => err.message,
      )
      let guard: NodeJS.Timeout | undefined
      const stuck = new Promise<undefined>((r) => (guard = setTimeout(r, 20_000, undefined))) // a hang guard
      const said = await Promise.race([call, stuck])
      clearTimeout(guard)
      if (said !== undefined) return said
      // Let the stuck read go: O_RDWR never blocks on a FIFO, and the read
      // sees the end once it is closed.
      let released = false
      void call.then(() => (released = true))
      while (!released) {
        closeSync(openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK))
        await new Promise((r) => setTimeout(r, 100))
      }
      assert.fail('fromEnv waited 20 s on a FIFO named as an instance record')
    }
    assert.match(await says(), /no longer running/, 'only a FIFO and a directory')
    await recordInstance(state, process.pid, await startTime(process.pid))
    await rename(join(instances, 'test-instance.json'), join(instances, 'c-large.json'))
    await appendFile(join(instances, 'c-large.json'), ' '.repeat(64 << 10))
    assert.match(await says(), /no longer running/, 'a record larger than the bound was read')
    await recordInstance(state, process.pid, await startTime(process.pid))
    assert.match(await says(), /set CONCH_TOKEN here too/, 'the records after what was skipped are read')
    await rm(instances, { recursive: true, force: true })
  })

  test('a dead daemon whose pid another process holds is said to be gone, as the Go client says', async () => {
    // Killed before it took its records back, the daemon left daemon.json
    // and its instance record naming its pid and that pid's start; the
    // kernel gave the pid to another process since (here a sleep). As the
    // Go client (internal/daemonrec), the daemon runs only while its pid is
    // held by the process its instance record names, of this boot and pid
    // namespace, and not a zombie.
    // The process is the child of a sleep that never waits for it, so that
    // it stays a zombie once killed (Node reaps its own children at once).
    const parent = spawn('sh', ['-c', 'sleep 60 & echo $!; exec sleep 61'], { stdio: ['ignore', 'pipe', 'ignore'] })
    const exited = new Promise((r) => parent.once('exit', r))
    const [line] = (await once(parent.stdout!, 'data')) as [Buffer]
    const pid = Number(line.toString().trim())
    try {
      await writeFile(join(state, 'daemon.json'), JSON.stringify({ url: 'http://127.0.0.1:1', tokenFile: '', pid }))
      const started = await startTime(pid)
      const gone = async (why: string) =>
        assert.rejects(Sandbox.fromEnv(), (err: Error) => {
          assert.match(err.message, /no longer running/, why)
          return true
        })
      await rm(join(state, 'instances'), { recursive: true, force: true })
      await gone('no instance record names the pid')
      await recordInstance(state, pid, started - 1)
      await gone('the record names an earlier start of the pid')
      await recordInstance(state, pid, started, { bootId: 'another boot' })
      await gone('the record is of another boot')
      await recordInstance(state, pid, started, { pidNamespace: 'pid:[1]' })
      await gone('the record is of another pid namespace')
      await recordInstance(state, pid, started)
      await assert.rejects(Sandbox.fromEnv(), /set CONCH_TOKEN here too/, 'the record names the process that holds the pid')
      // Killed and not yet reaped: a zombie holds the pid, and runs nothing.
      process.kill(pid, 'SIGKILL')
      const deadline = Date.now() + 30_000 // a hang guard
      while ((await statFields(pid))[0] !== 'Z') {
        assert.ok(Date.now() < deadline, 'no zombie 30 s later')
        await new Promise((r) => setTimeout(r, 10))
      }
      await gone('a zombie')
    } finally {
      process.kill(pid, 'SIGKILL')
      parent.kill('SIGKILL') // its zombie child goes to a reaper
      await exited
    }
  })
})

/** The fields of /proc/PID/stat from the third (the state) on: the command name before may hold anything. */
async function statFields(pid: number): Promise<string[]> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** When pid started, in clock ticks after boot (field 22 of /proc/PID/stat). */
async function startTime(pid: number): Promise<number> {
  return Number((await statFields(pid))[19])
}

/** Writes the instance record `conch serve` keeps of itself (instances/ID.json) naming pid, started at start. */
async function recordInstance(state: string, pid: number, start: number, other: { bootId?: string; pidNamespace?: string } = {}) {
  const record = {
    id: 'test-instance',
    pid,
    startTime: start,
    bootId: other.bootId ?? (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim(),
    pidNamespace: other.pidNamespace ?? (await readlink('/proc/self/ns/pid')),
    streamDir: '/nonexistent',
  }
  await mkdir(join(state, 'instances'), { recursive: true })
  await writeFile(join(state, 'instances', 'test-instance.json'), JSON.stringify(record))
}
