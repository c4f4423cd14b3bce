import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { NotFoundError, type ProcessDto, type Sandbox, type SignalReport, UnsupportedOperationError, type WaitResult } from '@conchsh/sdk'

import { type Daemon, recordingFetch, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon()
  sb = d.sandbox()
})
after(async () => d?.stop())

describe('ProcessService.run', () => {
  test('a string runs in the shell and returns its output and exit code', async () => {
    const r = await sb.process.run('echo out; echo err >&2; exit 3')
    assert.equal(r.reason, 'exited')
    assert.equal(r.exitCode, 3)
    assert.equal(r.rawReason, 'exited')
    assert.equal(r.stdout, 'out\n')
    assert.equal(r.stderr, 'err\n')
    // Two pipes read side by side: their order in output is the order the frames came in.
    assert.equal(r.output, r.logs.map((f) => f.data).join(''))
    assert.deepEqual(r.logs.map((f) => [f.channel, f.data]).sort(), [['stderr', 'err\n'], ['stdout', 'out\n']])
    assert.match(r.processId, /\S/)
  })

  test('{ cmd } with options, { argv } without a shell, and sandbox.exec', async () => {
    const r = await sb.process.run({ cmd: 'echo "$X" $(pwd)' }, { env: { X: 'x1' }, cwd: '/tmp', name: 'named' })
    assert.equal(r.stdout, 'x1 /tmp\n')
    const a = await sb.process.run({ argv: ['printf', '%s|', 'a b', '$HOME'] })
    assert.equal(a.stdout, 'a b|$HOME|')
    const e = await sb.exec('exit 0')
    assert.deepEqual([e.reason, e.exitCode], ['exited', 0])
  })

  test('usage comes back, whether the run ended in its first answer or after waiting on', async () => {
    const quick = (await sb.process.run('true')) as unknown as { usage?: { cpuMs?: number } }
    assert.equal(typeof quick.usage?.cpuMs, 'number')
    const waited = (await d.sandbox({ waitWindow: 100 }).process.run('sleep 0.4')) as unknown as {
      reason: string
      usage?: { cpuMs?: number }
    }
    assert.equal(waited.reason, 'exited')
    assert.equal(typeof waited.usage?.cpuMs, 'number', 'the usage of a run answered after a 202')
  })

  test('a 202 falls back to waiting and assembles output larger than one logs page', async () => {
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch, waitWindow: 100, logsPageSize: 2 })
    const script = 'sleep 0.4; for i in 1 2 3 4 5 6 7; do echo out$i; echo err$i >&2; sleep 0.01; done; exit 4'
    const r = await s.process.run(script)
    assert.deepEqual([r.reason, r.exitCode], ['exited', 4])
    const want = [1, 2, 3, 4, 5, 6, 7]
    assert.equal(r.stdout, want.map((i) => `out${i}\n`).join(''))
    assert.equal(r.stderr, want.map((i) => `err${i}\n`).join(''))
    const all = await s.process.connect(r.processId).logs()
    assert.deepEqual(r.logs, all.items)
    assert.equal(r.output, all.items.map((f) => f.data).join(''))
    assert.equal(rec.calls[0]!.status, 202, 'the run answered 202')
    assert.ok(rec.calls.some((c) => c.path.endsWith('/interact')), 'it waited with interact')
    const pages = rec.calls.filter((c) => c.path.includes('/logs?'))
    assert.ok(pages.length >= 7, `it paged the logs: ${pages.length} pages`)
  })

  test('a waitWindow or logsPageSize that is not a whole number is rounded: up to a whole ms, down to whole frames', async () => {
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch, waitWindow: 1000 / 3, logsPageSize: 2.5 })
    assert.deepEqual([s.transport.waitWindow, s.transport.logsPageSize], [334, 2])
    assert.deepEqual([d.sandbox({ waitWindow: 0.2, logsPageSize: 0.5 }).transport].map((t) => [t.waitWindow, t.logsPageSize]), [[1, 1]])
    // Past the window: run waits on, then pages the logs.
    const r = await s.process.run('sleep 0.5; for i in 1 2 3 4 5; do echo out$i; sleep 0.01; done')
    assert.deepEqual([r.reason, r.stdout], ['exited', 'out1\nout2\nout3\nout4\nout5\n'])
    assert.ok(rec.calls.some((c) => /\/logs\?.*limit=2(&|$)/.test(c.path)), 'it paged the logs, 2 frames a page')
    const h = await s.process.start('sleep 0.8; exit 3')
    const w = await h.wait()
    assert.deepEqual([w.reason, w.exitCode], ['exited', 3])
    assert.ok(rec.calls.some((c) => c.path.endsWith('/wait?timeout=334')), 'wait asked for the window rounded up')
    const server = await s.process.start('sleep 0.5; echo serving; sleep 30')
    try {
      const ready = await server.ready({ pattern: 'serving', timeout: 20_000 })
      assert.equal(ready.ready, true)
    } finally {
      await server.kill({ signal: 'KILL' })
    }
  })

  test('a logsPageSize of Infinity, or over 2^53 − 1, pages 2^53 − 1 frames a page', async () => {
    // Infinity was sent as limit=Infinity, which the daemon refuses, and so a run whose output
    // was paged rejected with InvalidArgumentError after its command had run.
    for (const size of [Infinity, 1e300]) {
      const rec = recordingFetch()
      const s = d.sandbox({ fetch: rec.fetch, waitWindow: 100, logsPageSize: size })
      assert.equal(s.transport.logsPageSize, Number.MAX_SAFE_INTEGER)
      const r = await s.process.run('sleep 0.3; seq 1 5') // past the window: it pages the logs
      assert.deepEqual([r.reason, r.stdout], ['exited', '1\n2\n3\n4\n5\n'])
      assert.ok(rec.calls.some((c) => c.path.includes(`/logs?`) && c.path.includes(`limit=${Number.MAX_SAFE_INTEGER}`)), `${size}: it paged the logs`)
    }
  })

  test('a caller timeout that runs out leaves the process running, with the output already written', async () => {
    // The budget leaves the process ample time to write its first line, even on a loaded machine.
    const r = await sb.process.run('echo started; sleep 30', { timeout: 1500 })
    assert.equal(r.reason, 'timed_out')
    assert.equal(r.rawReason, 'wait_timeout')
    assert.equal(r.exitCode, undefined)
    assert.equal(r.stdout, 'started\n')
    const h = sb.process.connect(r.processId)
    const p = await h.get()
    assert.equal(p.state, 'running')
    await h.kill({ signal: 'KILL' })
    const w = await h.wait()
    assert.deepEqual([w.reason, w.reason === 'signaled' && w.signal], ['signaled', 'KILL'])
  })

  test('a process or session command stopped by executionTimeout is timed_out with the exitCode and signal the daemon sent', async () => {
    const r = await sb.process.run('sleep 30', { executionTimeout: 300, timeout: 20_000 })
    const p = await sb.process.get(r.processId)
    assert.deepEqual([p.reason, typeof p.exitCode, p.signal], ['timed_out', 'number', 'TERM'], 'the daemon sends them')
    assert.deepEqual([r.reason, r.rawReason, r.exitCode, r.signal], ['timed_out', 'timed_out', p.exitCode, 'TERM'])
    const w = await sb.process.connect(r.processId).wait()
    assert.deepEqual([w.reason, w.exitCode, w.signal], ['timed_out', p.exitCode, 'TERM'])
    await using s = await sb.process.createSession()
    const c = await s.run('sleep 30', { executionTimeout: 300, timeout: 20_000 })
    const cp = await sb.process.get(c.processId)
    assert.deepEqual([cp.reason, typeof cp.exitCode], ['timed_out', 'number'], 'the daemon sends the status its shell saw')
    assert.deepEqual([c.reason, c.rawReason, c.exitCode, c.signal], ['timed_out', 'timed_out', cp.exitCode, cp.signal])
    const cw = await sb.process.connect(c.processId).wait()
    assert.deepEqual([cw.reason, cw.exitCode, cw.signal], ['timed_out', cp.exitCode, cp.signal])
  })

  test('a failed argv is a result', async () => {
    const r = await sb.process.run({ argv: ['/nonexistent/program'] })
    assert.equal(r.reason, 'failed')
  })
})

describe('ProcessService and ProcessHandle', () => {
  test('start, get, wait, logs with cursor, limit and base64, toJSON and connect', async () => {
    const h = await sb.process.start('printf "a\\n"; sleep 0.05; printf "\\377\\n"; sleep 0.05; printf "c\\n"', { name: 'pager', keepLogs: 'on_exit_ttl' })
    assert.equal(h.kind, 'exec')
    assert.equal(h.sandboxId, 'local')
    assert.deepEqual(h.toJSON(), { sandboxId: 'local', processId: h.id, kind: 'exec' })
    const w = await h.wait()
    assert.deepEqual([w.reason, w.exitCode], ['exited', 0])
    const p: ProcessDto = await sb.process.get(h.id)
    assert.equal(p.state, 'terminal')
    assert.equal(p.rawState, 'terminal')
    assert.equal(p.kind, 'exec')
    assert.equal(p.rawKind, 'exec')
    assert.equal(p.name, 'pager')
    assert.equal(p.keepLogs, 'on_exit_ttl')
    assert.equal(p.rawKeepLogs, 'on_exit_ttl')
    assert.equal(p.stdin, 'closed')
    assert.equal(p.system, false)
    assert.equal(p.reason, 'exited')
    assert.equal(p.exitCode, 0)
    const first = await h.logs({ limit: 1 })
    assert.equal(first.items.length, 1)
    assert.equal(first.items[0]!.data, 'a\n')
    assert.equal(first.truncatedHead, false)
    const rest = await h.logs({ cursor: first.items[0]!.cursor })
    assert.deepEqual(rest.items.map((f) => f.encoding), ['base64', 'text'])
    assert.equal(Buffer.from(rest.items[0]!.data, 'base64').toString('latin1'), '\xff\n')
    const b64 = await h.logs({ encoding: 'base64' })
    assert.ok(b64.items.every((f) => f.encoding === 'base64'))
    const again = sb.process.connect(h.toJSON())
    assert.equal((await again.get()).id, h.id)
    assert.equal(sb.process.connect(h.id).kind, undefined)
  })

  test('list filters by state, kind, name and pid, and pages with cursor and limit', async () => {
    const h = await sb.process.start('sleep 30', { name: 'listed' })
    const p = await h.get()
    const byName = await sb.process.list({ name: 'listed', state: 'running', kind: 'exec' })
    assert.deepEqual(byName.items.map((i) => i.id), [h.id])
    const byPid = await sb.process.list({ pid: p.pid! })
    assert.deepEqual(byPid.items.map((i) => i.id), [h.id])
    assert.equal((await sb.process.list({ name: 'listed', state: 'terminal' })).items.length, 0)
    const one = await sb.process.list({ limit: 1, state: 'all' })
    assert.equal(one.items.length, 1)
    assert.ok(one.next, 'a first page of one has a next')
    const two = await sb.process.list({ limit: 1, cursor: one.next! })
    assert.notEqual(two.items[0]!.id, one.items[0]!.id)
    await h.delete()
    await assert.rejects(h.get(), NotFoundError)
  })

  test('stdin, stdinEof, and the 409 for a process whose stdin is closed', async () => {
    const h = await sb.process.start('cat; echo done', { stdin: 'open' })
    await h.stdin('hello ')
    await h.stdin(new TextEncoder().encode('bytes\n'))
    await h.stdinEof()
    await h.wait({ timeout: 10_000 })
    const page = await h.logs()
    assert.equal(page.items.map((f) => f.data).join(''), 'hello bytes\ndone\n')
    const closed = await sb.process.start('sleep 5')
    await assert.rejects(closed.stdin('x'), UnsupportedOperationError)
    await closed.kill()
    const e = await sb.process.start('cat', { stdin: 'open' })
    await e.stdin('last\n', { eof: true })
    await e.wait()
    assert.equal((await e.logs()).items.map((f) => f.data).join(''), 'last\n')
  })

  test('wait with a timeout comes back timed_out and the process goes on', async () => {
    const h = await sb.process.start('sleep 30')
    const w = await h.wait({ timeout: 200 })
    assert.deepEqual([w.reason, w.rawReason], ['timed_out', 'wait_timeout'])
    assert.equal((await h.get()).state, 'running')
    await h.kill({ signal: 'INT' })
    const end = await h.wait()
    assert.equal(end.reason, 'signaled')
  })

  test('interact asks for at most 280 s, which Node\'s fetch waits for', async () => {
    // Node's fetch gives up on an answer after 300 s: an interact with no
    // timeout, or a longer one, failed then as a generic fetch error.
    const sent: unknown[] = []
    const s = d.sandbox({
      fetch: async (input, init) => {
        if (String(input).endsWith('/interact')) sent.push(JSON.parse(String(init?.body)).timeout)
        return fetch(input, init)
      },
    })
    const h = await s.process.start('sleep 0.2')
    for (const timeout of [undefined, 600_000, 1000 / 3]) {
      await h.interact(timeout === undefined ? {} : { timeout })
    }
    assert.deepEqual(sent, [280_000, 280_000, 334])
  })

  test('the record keeps a long argv\'s head, saying how many elements the whole had', async () => {
    const argv = ['true', ...Array(3000).fill('x'.repeat(30))]
    const h = await sb.process.start({ argv })
    await h.wait({ timeout: 30_000 })
    const p: ProcessDto = await h.get()
    assert.deepEqual([p.argvTruncated, p.argvCount], [true, argv.length])
    assert.ok((p.argv?.length ?? 0) < argv.length)
    await h.delete()
  })

  test('wait repeats while the daemon answers 202', async () => {
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch, waitWindow: 100 })
    const h = await s.process.start('sleep 0.5; exit 7')
    const w = await h.wait()
    assert.deepEqual([w.reason, w.exitCode], ['exited', 7])
    const waits = rec.calls.filter((c) => c.path.includes('/wait?'))
    assert.ok(waits.length >= 2 && waits[0]!.status === 202, `${waits.length} waits`)
  })

  test('a signal caught or not: handled, and the status beside the signal', async () => {
    // A process that catches the TERM it is sent and exits with a status of
    // its own is signaled, handled, with that status; one the TERM ends is
    // signaled with 128+15 and not handled.
    for (const [cmd, code, handled] of [
      ["trap 'exit 15' TERM; echo ready; sleep 30 & wait", 15, true],
      ['echo ready; exec sleep 30', 143, undefined],
    ] as const) {
      const h = await sb.process.start(cmd)
      assert.equal((await h.ready({ pattern: 'ready', timeout: 30_000 })).ready, true)
      await h.kill({ signal: 'TERM' })
      const w: WaitResult & SignalReport = await h.wait({ timeout: 30_000 })
      assert.deepEqual([w.reason, w.signal, w.exitCode, w.signaledExitCode, w.handled], ['signaled', 'TERM', undefined, code, handled])
      const p = await h.get()
      assert.deepEqual([p.exitCode, p.handled], [code, handled])
      await h.delete()
    }
  })

  test('kill escalates to KILL after escalateAfter', async () => {
    const h = await sb.process.start("trap '' TERM; echo ready; sleep 30 & wait; sleep 30")
    for await (const ev of h.streamLogs()) if (ev.type === 'log') break
    await h.kill({ signal: 'TERM', escalateAfter: 200, escalateTo: 'KILL' })
    const w = await h.wait({ timeout: 10_000 })
    assert.deepEqual([w.reason, w.signal], ['signaled', 'KILL'])
  })

  test('resize and delete of a running process; resize of an exec is refused', async () => {
    const exec = await sb.process.start('sleep 30')
    await assert.rejects(exec.resize(80, 24), UnsupportedOperationError)
    await exec.delete()
    await assert.rejects(exec.wait(), NotFoundError)
  })
})
