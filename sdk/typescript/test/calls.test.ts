// Request/response calls as an agent runtime makes them: the transport's
// bounds, input that UTF-8 cannot carry, and discovery from the state
// directory.

import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises'
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
    await assert.rejects(Sandbox.fromEnv(), /set CONCH_TOKEN here too/)
  })
})
