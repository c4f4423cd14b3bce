// Promises 25-31 of docs/behaviour.md through the SDK: runs that come back early,
// interact, ready, plain text, bounded answers, and what get() says.

import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import { isRunning, runDetails, type Sandbox } from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon()
  sb = d.sandbox()
})
after(async () => d?.stop())

/** Hang guard for a call that should come back within seconds. */
const guard = 20_000

describe('runs that come back early', () => {
  test('a session command waiting for input comes back, and interact answers it', async () => {
    await using s = await sb.process.createSession()
    const r = await s.run(`printf 'name? '; read n; echo "hi $n"`, { stdin: 'open', timeout: guard })
    assert.ok(isRunning(r), `came back running: ${JSON.stringify(r)}`)
    assert.equal(r.waitingForInput, true)
    assert.equal(r.rawReason, 'waiting_for_input')
    assert.equal(r.output, 'name? ')
    const h = sb.process.connect(r.processId)
    const p = await h.get()
    assert.equal(p.waitingForInput, true)
    assert.match(p.lastOutputAt ?? '', /^\d{4}-\d\d-\d\dT/)
    const a = await h.interact({ input: 'ada\n', timeout: guard })
    assert.equal(a.running, false)
    assert.equal(a.output, 'hi ada\n')
    assert.deepEqual([a.reason, a.exitCode], ['exited', 0])
  })

  test('idleTimeout: a command that keeps writing runs to its end across wait windows, in a session too', async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    const script = 'for i in $(seq 1 15); do echo t$i; sleep 0.2; done; exit 5'
    const want = Array.from({ length: 15 }, (_, i) => `t${i + 1}\n`).join('')
    const r = await s.exec(script, { idleTimeout: 5000, timeout: guard })
    assert.deepEqual([r.reason, r.rawReason, r.exitCode, isRunning(r)], ['exited', 'exited', 5, false])
    assert.equal(r.stdout, want)
    await using session = await s.process.createSession()
    const c = await session.run(script.replace('exit 5', 'true'), { idleTimeout: 5000, timeout: guard })
    assert.deepEqual([c.reason, c.exitCode, isRunning(c)], ['exited', 0, false])
    assert.equal(c.stdout, want)
  })

  test('idleTimeout longer than the wait window still comes back once the command was quiet that long', async () => {
    const s = d.sandbox({ waitWindow: 300 })
    const t0 = Date.now()
    const r = await s.exec('echo a; sleep 30', { idleTimeout: 1500, timeout: 10_000 })
    assert.ok(isRunning(r), JSON.stringify(r))
    assert.equal(r.rawReason, 'idle_timeout')
    assert.equal(r.output, 'a\n')
    assert.ok(Date.now() - t0 >= 1400, `came back after ${Date.now() - t0} ms`)
    await s.process.connect(r.processId).delete()
  })

  test('idleTimeout comes back with the output so far; interact reads on from next, no byte twice', async () => {
    const script = `python3 -u -c 'import time\nprint("first")\ntime.sleep(1.5)\nfor i in range(300): print(f"line{i}"); time.sleep(0.002)'`
    const r = await sb.process.run(script, { idleTimeout: 300, timeout: guard })
    assert.ok(isRunning(r), `came back running: ${JSON.stringify(r)}`)
    assert.equal(r.rawReason, 'idle_timeout')
    assert.equal(r.waitingForInput, false)
    const h = sb.process.connect(r.processId)
    let text = r.output
    let cursor = r.next
    const end = Date.now() + 60_000
    while (Date.now() < end) {
      const a = await h.interact({ cursor, timeout: 200 })
      text += a.output
      if (!a.running) break
      cursor = a.next ?? cursor
    }
    const want = ['first', ...Array.from({ length: 300 }, (_, i) => `line${i}`)].map((l) => l + '\n').join('')
    assert.equal(text, want)
  })

  test("a run back on the caller's timeout before any output has next: interact reads on from it, nothing lost", async () => {
    // The command writes only once the test lets it, after the run came back.
    const gate = join(await mkdtemp(join(d.dir, 'gate-')), 'go')
    const r = runDetails(await sb.exec(`while [ ! -e ${gate} ]; do sleep 0.05; done; echo early; echo late`, { timeout: 200 }))
    assert.deepEqual([r.state, r.rawReason, r.output], ['running', 'wait_timeout', ''])
    assert.equal(typeof r.next, 'string', `no next to read on from: ${JSON.stringify(r)}`)
    await writeFile(gate, '')
    const h = sb.process.connect(r.processId)
    assert.deepEqual([(await h.wait({ timeout: guard })).reason], ['exited'])
    // Read on from next only once the command wrote it all: nothing it wrote after the run came back is lost.
    const a = await h.interact({ cursor: r.next, timeout: guard })
    assert.equal(a.running, false)
    assert.equal(a.stdout, 'early\nlate\n')
  })

  test('past the daemon wait window, run still comes back when the command starts waiting for input', async () => {
    const s = d.sandbox({ waitWindow: 100 })
    const r = await s.process.run(`sleep 0.5; printf 'go? '; read x`, { stdin: 'open', timeout: guard })
    assert.ok(isRunning(r), `came back running: ${JSON.stringify(r)}`)
    assert.equal(r.rawReason, 'waiting_for_input')
    assert.equal(r.output, 'go? ')
    await s.process.connect(r.processId).delete()
  })

  test('plain: true renders overwrites; logs stay byte-exact', async () => {
    const r = await sb.process.run(`printf '10%%\\r50%%\\r\\033[32mdone\\033[0m\\n'`, { plain: true })
    assert.equal(r.output, 'done\n')
    assert.equal(r.logs.map((f) => f.data).join(''), '10%\r50%\r\x1b[32mdone\x1b[0m\n')
  })

  test('outputLimit keeps head and tail and says what it left out', async () => {
    const r = runDetails(await sb.process.run(`python3 -u -c 'import time\nfor i in range(1, 201): print(f"line{i}"); time.sleep(0.001)'`, { outputLimit: 200 }))
    assert.equal(r.state, 'terminal')
    assert.ok((r.omittedBytes ?? 0) > 0, `omittedBytes: ${r.omittedBytes}`)
    assert.equal(typeof r.omittedAfter, 'string')
    assert.ok(r.output.startsWith('line1\n') && r.output.endsWith('line200\n'), r.output)
    const full = Array.from({ length: 200 }, (_, i) => `line${i + 1}\n`).join('')
    assert.equal(r.output.length + r.omittedBytes!, full.length)
  })

  test("a session run's result carries the cwd it left the shell in", async () => {
    await using s = await sb.process.createSession({ cwd: '/' })
    const r = runDetails(await s.run('cd /tmp'))
    assert.equal(r.cwd, '/tmp')
    assert.equal(r.state, 'terminal')
  })
})

describe('ready', () => {
  const server = `python3 -u -c 'import http.server as h; s=h.HTTPServer(("127.0.0.1", 0), h.SimpleHTTPRequestHandler); print("serving", s.server_port, flush=True); s.serve_forever()'`

  test('an exec process listening on a port, and a pattern', async () => {
    const h = await sb.process.start(server)
    try {
      const byPattern = await h.ready({ pattern: 'serving \\d+', timeout: guard })
      assert.equal(byPattern.ready, true)
      assert.match(byPattern.ready ? byPattern.match ?? '' : '', /^serving \d+$/)
      const port = Number(/\d+/.exec(byPattern.ready ? byPattern.match! : '')![0])
      const byPort = await h.ready({ port, timeout: guard })
      assert.deepEqual(byPort.ready && byPort.port, port)
      const any = await h.ready({ port: 'any', timeout: guard })
      assert.deepEqual(any.ready && any.port, port)
    } finally {
      await h.delete()
    }
  })

  test('a server started with & in a session belongs to its command', async () => {
    await using s = await sb.process.createSession()
    const r = await s.run(`${server} &`, { timeout: guard })
    assert.equal(r.reason, 'exited')
    const h = sb.process.connect(r.processId)
    const ok = await h.ready({ port: 'any', timeout: guard })
    assert.equal(ok.ready, true)
    assert.equal(typeof (ok.ready && ok.port), 'number')
  })

  test('ready: false with the result when the process ended first', async () => {
    const h = await sb.process.start('echo nothing here; exit 7')
    const r = await h.ready({ pattern: 'never', timeout: guard })
    assert.equal(r.ready, false)
    assert.deepEqual(!r.ready && [r.result.reason, r.result.exitCode], ['exited', 7])
  })

  test('an AbortSignal ends ready at once with its reason, within a window or between two, the process running', async () => {
    const h = await sb.process.start('sleep 30')
    try {
      const why = new Error('the agent moved on')
      for (const [waitWindow, after] of [[60_000, 300], [200, 700]]) {
        const ac = new AbortController()
        setTimeout(() => ac.abort(why), after)
        const began = Date.now()
        await assert.rejects(d.sandbox({ waitWindow }).process.connect(h.id).ready({ pattern: 'never', timeout: guard, signal: ac.signal }),
          (e: unknown) => e === why, `waitWindow ${waitWindow}`)
        assert.ok(Date.now() - began < guard / 2, `waitWindow ${waitWindow}: the abort did not end the wait`)
      }
      await assert.rejects(h.ready({ pattern: 'never', signal: AbortSignal.abort(why) }), (e: unknown) => e === why)
      assert.equal((await h.get()).state, 'running')
    } finally {
      await h.delete()
    }
  })

  test('a wait that runs out is ready: false, timed_out / wait_timeout, the process running', async () => {
    const h = await sb.process.start('sleep 30')
    try {
      const r = await h.ready({ pattern: 'never', timeout: 300 })
      assert.deepEqual(!r.ready && [r.result.reason, r.result.rawReason], ['timed_out', 'wait_timeout'])
      assert.equal((await h.get()).state, 'running')
    } finally {
      await h.delete()
    }
  })
})

describe('code contexts', () => {
  test('a Python context keeps state across cells, shows the last value, and lives through an interrupt', async () => {
    await using ctx = await sb.process.createSession({ language: 'python' })
    const set = await ctx.runCode('x = 6 * 7', { timeout: guard })
    assert.deepEqual([set.reason, set.exitCode, set.stdout], ['exited', 0, ''])
    const get = await ctx.runCode('x', { timeout: guard })
    assert.deepEqual([get.reason, get.exitCode, get.stdout], ['exited', 0, '42\n'])
    const fail = await ctx.runCode('raise ValueError("boom")', { timeout: guard })
    assert.equal(fail.exitCode, 1)
    assert.match(fail.stderr, /ValueError: boom/)
    const cell = await ctx.startCode('import time\ntime.sleep(60)')
    assert.equal(cell.kind, 'code')
    await cell.kill({ signal: 'INT' })
    const w = await cell.wait({ timeout: guard })
    assert.deepEqual([w.reason, w.signal], ['signaled', 'INT'])
    const again = await ctx.runCode('x + 1', { timeout: guard })
    assert.equal(again.stdout, '43\n')
  })
})
