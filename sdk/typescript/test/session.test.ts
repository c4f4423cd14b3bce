import assert from 'node:assert/strict'
import { mkdtemp, realpath } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import { NotFoundError, Sandbox, Session, UnsupportedOperationError } from '@conchsh/sdk'

import { type Daemon, recordingFetch, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon()
  sb = d.sandbox({ sandboxId: 'box-1' })
})
after(async () => d?.stop())

for (const shell of ['bash', 'dash']) {
  describe(`a session on ${shell}`, () => {
    test('state carries over, cwd and env from creation, exit codes and stderr', async () => {
      const dir = await realpath(await mkdtemp(join(d.dir, 'cwd-')))
      await using s = await sb.process.createSession({ shell, cwd: dir, env: { GREETING: 'hi' }, name: `s-${shell}` })
      assert.equal(s.sandboxId, 'box-1')
      await s.run('mkdir sub && cd sub && export MODE=test')
      const r = await s.run('echo "$GREETING $MODE"; pwd; echo warn >&2; false')
      assert.deepEqual([r.reason, r.exitCode], ['exited', 1])
      assert.equal(r.stdout, `hi test\n${dir}/sub\n`)
      assert.equal(r.stderr, 'warn\n')
      const p = await s.get()
      assert.equal(p.cwd, `${dir}/sub`)
      assert.equal(p.kind, 'session')
      assert.equal(p.system, true)
      assert.equal(p.sessionId, s.id)
      assert.equal(p.state, 'running')
      assert.equal(p.name, `s-${shell}`)
      assert.match(p.resolvedShell ?? '', new RegExp(shell))
    })

    test('start queues a command; INT stops it and the session lives', async () => {
      await using s = await sb.process.createSession({ shell })
      const h = await s.start('echo before; sleep 30', { name: 'sleeper', keepLogs: 'until_cleanup' })
      assert.equal(h.kind, 'session')
      for await (const ev of h.streamLogs()) if (ev.type === 'log') break
      await h.kill({ signal: 'INT' })
      const w = await h.wait({ timeout: 10_000 })
      assert.deepEqual([w.reason, w.signal], ['signaled', 'INT'])
      const cmd = await h.get()
      assert.equal(cmd.shellCommand, 'echo before; sleep 30')
      assert.equal(cmd.sessionId, s.id)
      assert.equal(cmd.system, false)
      const r = await s.run('echo alive')
      assert.equal(r.stdout, 'alive\n')
    })

    test('executionTimeout ends a command timed_out; stdin open reads what is written', async () => {
      await using s = await sb.process.createSession({ shell })
      const r = await s.run('sleep 30', { executionTimeout: 300 })
      assert.equal(r.reason, 'timed_out')
      assert.equal(r.rawReason, 'timed_out')
      const h = await s.start('read line; echo "got $line"', { stdin: 'open' })
      await h.stdin('value\n', { eof: true })
      await h.wait({ timeout: 10_000 })
      assert.equal((await h.logs()).items.map((f) => f.data).join(''), 'got value\n')
      const q = await s.run('cat', { stdin: 'closed', name: 'eof' })
      assert.deepEqual([q.reason, q.exitCode, q.output], ['exited', 0, ''])
    })
  })
}

describe('Session', () => {
  test('toJSON and connectSession rebind without a request; a run through it works', async () => {
    const s = await sb.process.createSession()
    assert.deepEqual(s.toJSON(), { sandboxId: 'box-1', sessionId: s.id })
    const again = sb.process.connectSession(s.toJSON())
    assert.ok(again instanceof Session)
    assert.equal((await again.run('echo $((1+2))')).stdout, '3\n')
    assert.equal(sb.process.connectSession(s.id).id, s.id)
    const direct = new Session(sb.process, s.id)
    assert.equal((await direct.get()).id, s.id)
    await s.delete()
    await assert.rejects(again.get(), NotFoundError)
    await assert.rejects(s.delete(), NotFoundError)
  })

  test('await using deletes the session at scope exit, and is quiet when it is already gone', async () => {
    let id: string
    {
      await using s = await sb.process.createSession()
      id = s.id
      assert.equal((await s.get()).state, 'running')
    }
    await assert.rejects(sb.process.connectSession(id).get(), NotFoundError)
    {
      await using s = await sb.process.createSession()
      await s.delete()
    }
  })

  test('a run on a session that ended is refused', async () => {
    const s = await sb.process.createSession({ shell: 'dash' })
    const r = await s.run('exit 5')
    assert.deepEqual([r.reason, r.exitCode], ['exited', 5])
    await assert.rejects(s.run('true'), (err: unknown) => err instanceof UnsupportedOperationError || err instanceof NotFoundError)
    await s[Symbol.asyncDispose]()
  })

  test('a session command with a 202 fallback and a caller timeout', async () => {
    await using s = await sb.process.createSession()
    const t = await s.run('echo one; sleep 30', { timeout: 1500 })
    assert.deepEqual([t.reason, t.rawReason, t.stdout], ['timed_out', 'wait_timeout', 'one\n'])
    await sb.process.connect(t.processId).kill({ signal: 'INT' })
    const slow = d.sandbox({ waitWindow: 50, logsPageSize: 1 })
    const r = await slow.process.connectSession(s.id).run('sleep 0.3; echo a; echo b >&2; echo c')
    assert.deepEqual([r.reason, r.exitCode, r.stdout, r.stderr], ['exited', 0, 'a\nc\n', 'b\n'])
  })
})

describe('delete of what does not stop', () => {
  test('a session command that does not stop within 5 s is refused with UnsupportedOperationError; deleting its session ends it', async () => {
    const s = await sb.process.createSession()
    const c = await s.start("trap '' INT TERM HUP; echo armed; while :; do sleep 0.1; done")
    for await (const ev of c.streamLogs({ limit: 1 })) assert.equal(ev.type, 'log')
    await assert.rejects(c.delete(), (e: unknown) =>
      e instanceof UnsupportedOperationError && e.code === 'unsupported_operation' && e.status === 409 && /did not stop within 5s/.test(e.message))
    assert.equal((await c.get()).state, 'running')
    await s.delete()
    await assert.rejects(c.get(), NotFoundError)
  })

  test('a running code cell is refused with UnsupportedOperationError; once interrupted it is deleted', async () => {
    await using ctx = await sb.process.createSession({ language: 'python' })
    const cell = await ctx.startCode('import time\nprint("sleeping", flush=True)\ntime.sleep(60)')
    for await (const ev of cell.streamLogs({ limit: 1 })) assert.equal(ev.type, 'log')
    await assert.rejects(cell.delete(), (e: unknown) =>
      e instanceof UnsupportedOperationError && e.status === 409 && /running code cell/.test(e.message))
    await cell.kill({ signal: 'INT' })
    await cell.wait({ timeout: 20_000 })
    await cell.delete()
    await assert.rejects(cell.get(), NotFoundError)
  })
})

describe('a value of the wrong type', () => {
  test('is refused by name before anything is sent: never undefined run as an empty command', async () => {
    await using s = await sb.process.createSession()
    const bad: unknown[] = [undefined, null, 5, ['true']]
    for (const v of bad) {
      await assert.rejects(s.run(v as string), (e: unknown) => e instanceof TypeError && /a session command is a string, not/.test(e.message))
      await assert.rejects(s.start(v as string), TypeError)
      await assert.rejects(s.runCode(v as string), (e: unknown) => e instanceof TypeError && /a cell's code is a string/.test(e.message))
      await assert.rejects(s.startCode(v as string), TypeError)
    }
    for (const v of [...bad, { cmd: 5 }, { argv: [] }, { argv: ['echo', 1] }, { cmd: 'true', argv: ['true'] }]) {
      await assert.rejects(sb.process.run(v as string), (e: unknown) => e instanceof TypeError && /a command is a shell string/.test(e.message))
      await assert.rejects(sb.process.start(v as string), TypeError)
    }
    assert.equal((await s.run('echo ok')).stdout, 'ok\n')
    const listed = await sb.process.list({ sessionId: s.id })
    assert.deepEqual(listed.items.filter((p) => p.id !== s.id).length, 1, 'a refused command reached the daemon')
  })

  test('a url or token that is not a string is a TypeError that never shows the token', () => {
    assert.throws(() => new Sandbox({ url: 'http://127.0.0.1:1', token: undefined as unknown as string }), /the token must be a string, not undefined/)
    assert.throws(() => new Sandbox({ url: undefined as unknown as string, token: 'secret' }), (e: unknown) => e instanceof TypeError && !e.message.includes('secret'))
  })

  test('input that is not a string or bytes is a TypeError, and nothing of it is sent: stdin, interact, a PTY write', async () => {
    const bad: unknown[] = [5, { a: 1 }, [104, 105], null, true, new ArrayBuffer(2)]
    const h = await sb.process.start('cat', { stdin: 'open' })
    for (const v of bad) {
      await assert.rejects(h.stdin(v as string), (e: unknown) => e instanceof TypeError && /input is a string or bytes \(Uint8Array\), not/.test(e.message), String(v))
      await assert.rejects(h.stdin(v as string, { eof: true }), TypeError)
      await assert.rejects(h.interact({ input: v as string, timeout: 1 }), (e: unknown) => e instanceof TypeError && /input is a string or bytes/.test(e.message), String(v))
    }
    await h.stdin(new TextEncoder().encode('bytes '))
    await h.stdin('ok\n', { eof: true })
    assert.equal((await h.wait({ timeout: 20_000 })).reason, 'exited')
    assert.equal((await h.logs()).items.map((f) => f.data).join(''), 'bytes ok\n', 'a refused input was sent')
    const { handle, connection } = await sb.pty.attach('cat')
    try {
      for (const v of bad) assert.throws(() => connection.write(v as string), (e: unknown) => e instanceof TypeError && /input is a string or bytes/.test(e.message))
    } finally {
      connection.close()
      await handle.delete()
    }
  })

  test('a negative (or NaN) interact timeout or idleTimeout is a RangeError, and nothing is sent', async () => {
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch })
    const h = await s.process.start('sleep 30')
    try {
      for (const o of [{ timeout: -1 }, { timeout: Number.NaN }, { idleTimeout: -5 }, { idleTimeout: Number.NaN, timeout: 1000 }]) {
        const t0 = Date.now()
        await assert.rejects(h.interact(o), (e: unknown) => e instanceof RangeError && /it must not be negative/.test(e.message), JSON.stringify(o))
        assert.ok(Date.now() - t0 < 5000, 'it waited')
      }
      assert.deepEqual(rec.calls.filter((c) => c.path.includes('/interact')), [], 'a refused interact was sent')
      const a = await h.interact({ timeout: 1, idleTimeout: 0 })
      assert.equal(a.running, true, 'a timeout of 1 ms and an idleTimeout of 0 are taken')
    } finally {
      await h.kill({ signal: 'KILL' })
    }
  })

  test('a token an HTTP header cannot carry is refused when the sandbox is made, never shown', () => {
    for (const token of ['sec\nret', 'sec\r\nret', 'sec\tret', 'sec\u0000ret', 'sec\u007fret', 'sëcret', 'secret\n']) {
      assert.throws(() => new Sandbox({ url: d.url, token }), (e: unknown) => {
        assert.ok(e instanceof TypeError, String(e))
        assert.match(e.message, /the token holds a character an HTTP header cannot carry/)
        assert.ok(!e.message.includes('sec') && !e.message.includes('ret'), `the token shows: ${e.message}`)
        return true
      }, JSON.stringify(token))
    }
    // Every printable ASCII character is a token's.
    const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join('')
    assert.equal(new Sandbox({ url: d.url, token: printable }).transport.token, printable)
  })
})

describe('run with an AbortSignal', () => {
  test('aborting rejects with its reason at once, and the command runs on', async () => {
    await using s = await sb.process.createSession()
    const dir = await realpath(await mkdtemp(join(d.dir, 'abort-')))
    const ac = new AbortController()
    const why = new Error('the agent moved on')
    setTimeout(() => ac.abort(why), 300)
    const began = Date.now()
    await assert.rejects(s.run(`sleep 1; echo done > ${dir}/f`, { signal: ac.signal, timeout: 60_000 }), (e: unknown) => e === why)
    assert.ok(Date.now() - began < 5_000, 'the abort did not end the wait')
    const r = await s.run(`cat ${dir}/f`, { timeout: 30_000 })
    assert.equal(r.stdout, 'done\n', 'the command was left running, and the next one ran after it')
    await assert.rejects(s.run('true', { signal: AbortSignal.abort(why) }), (e: unknown) => e === why)
    await assert.rejects(sb.process.run('true', { signal: AbortSignal.abort(why) }), (e: unknown) => e === why)
    const listed = await sb.process.list({ sessionId: s.id })
    assert.equal(listed.items.filter((p) => p.id !== s.id).length, 2, 'an aborted signal sent its run anyway')
  })

  test('a one-shot run past the wait window stops waiting when aborted', async () => {
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 1_500)
    const began = Date.now()
    await assert.rejects(d.sandbox({ waitWindow: 500 }).process.run('sleep 30', { signal: ac.signal }), { name: 'AbortError' })
    assert.ok(Date.now() - began < 10_000)
  })
})
