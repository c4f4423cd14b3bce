import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { inspect } from 'node:util'

import { ConchError, DeadlineExceededError, type Sandbox } from '@conchsh/sdk'

import { type Daemon, freeze, recordingFetch, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon()
  sb = d.sandbox()
})
after(async () => d?.stop())

const sleep = (ms: number): Promise<'late'> => new Promise((r) => setTimeout(() => r('late'), ms).unref())

/**
 * Requires every one of calls, made to a daemon that does not answer, to
 * reject with DeadlineExceededError (no HTTP status) within 30 s, where
 * fetch alone would wait 300 s, and returns their rejections in order.
 */
async function allDeadlineExceeded(calls: Promise<unknown>[]): Promise<PromiseRejectedResult[]> {
  const settled = await Promise.race([Promise.allSettled(calls), sleep(30_000)])
  assert.notEqual(settled, 'late', 'the calls are still waiting after 30 s')
  for (const [i, r] of (settled as PromiseSettledResult<unknown>[]).entries()) {
    assert.equal(r.status, 'rejected', `call ${i} was answered: ${r.status === 'fulfilled' ? inspect(r.value, { depth: 1 }) : ''}`)
    const err = (r as PromiseRejectedResult).reason
    assert.ok(err instanceof DeadlineExceededError, String(err))
    assert.equal(err.status, 0)
  }
  return settled as PromiseRejectedResult[]
}

describe("a caller's timeout bounds the request", () => {
  test('a daemon that does not answer: run, wait and ready reject with DeadlineExceededError', async () => {
    const h = await sb.process.start('sleep 60')
    try {
      await freeze(d.pid)
      const t0 = Date.now()
      // 1 s and the margin of 10 s.
      const rejected = await allDeadlineExceeded([
        sb.exec('echo hi', { timeout: 1000 }),
        h.wait({ timeout: 1000 }),
        h.ready({ port: 1, timeout: 1000 }),
        h.interact({ timeout: 1000 }),
      ])
      for (const { reason } of rejected) {
        assert.ok(reason instanceof ConchError)
        assert.equal(reason.code, 'deadline_exceeded')
      }
      assert.ok(Date.now() - t0 >= 1000)
    } finally {
      process.kill(d.pid, 'SIGCONT')
    }
    await h.delete()
  })

  test('a daemon that does not answer: requests it answers at once reject with DeadlineExceededError after requestTimeout', async () => {
    const s = d.sandbox({ requestTimeout: 1000 })
    const h = await s.process.start('sleep 60', { stdin: 'open' })
    const pty = await s.pty.start('sleep 60')
    try {
      await freeze(d.pid)
      const t0 = Date.now()
      // 1 s each.
      const settled = await allDeadlineExceeded([
        s.process.start('echo hi'),
        s.process.get(h.id),
        s.process.list(),
        h.logs(),
        h.stdin('x'),
        s.pty.connect(pty.id).attach(), // the upgrade is never answered
        // ids none has: what the daemon does with them once it goes on
        // changes nothing. A kill may wait for a session's escalation (5 s
        // and KILL 5 s later) and a delete for what it stops (15 s) beyond
        // requestTimeout.
        s.process.connect('no-such-process').kill(),
        s.process.connect('no-such-process').delete(),
      ])
      for (const { reason } of settled.slice(0, -2)) assert.match(reason.message, /no answer from .* within 1000 ms/)
      assert.match(settled.at(-2)!.reason.message, /no answer from .* within 11000 ms/)
      assert.match(settled.at(-1)!.reason.message, /no answer from .* within 16000 ms/)
      const [started, got] = settled
      assert.match(started!.reason.message, /POST \/v1\/processes: .*; it may have been carried out$/)
      assert.doesNotMatch(got!.reason.message, /carried out/)
      assert.ok(Date.now() - t0 >= 1000)
    } finally {
      process.kill(d.pid, 'SIGCONT')
    }
    await h.delete()
    await pty.delete()
    assert.equal(sb.transport.requestTimeout, 30_000)
  })

  test("a session's kill that waits out its escalation past requestTimeout is answered", async () => {
    // The daemon answers a session's kill once the session has ended: after
    // escalateAfter when its shell outlives the signal.
    const s = d.sandbox({ requestTimeout: 1000 })
    await using session = await s.process.createSession({ shell: 'bash' })
    await session.run("trap '' TERM")
    await s.process.connect(session.id).kill({ signal: 'TERM', escalateAfter: 2500 })
    assert.equal((await session.get()).state, 'terminal')
  })

  test('a delete that waits for what it stops past requestTimeout is answered', async () => {
    // KILL comes 5 s after TERM, which this process ignores.
    const s = d.sandbox({ requestTimeout: 1000 })
    const h = await s.process.start("trap '' TERM; echo up; while :; do sleep 1; done")
    await h.ready({ pattern: 'up', timeout: 10_000 })
    await h.delete()
    await assert.rejects(h.get(), (err: unknown) => err instanceof ConchError && err.code === 'not_found')
  })

  test('a wait window over what fetch waits for an answer is cut to 280 s per request', async () => {
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch, waitWindow: 400_000 })
    assert.equal(s.transport.waitWindow, 280_000)
    const h = await s.process.start('sleep 0.1')
    assert.equal((await h.wait()).reason, 'exited')
    assert.deepEqual(rec.calls.filter((c) => c.path.includes('/wait')).map((c) => c.path), [`/v1/processes/${h.id}/wait?timeout=280000`])
  })
})

describe('a negative timeout', () => {
  test('is refused, not taken for no timeout', async () => {
    const h = await sb.process.start('sleep 30')
    try {
      for (const call of [() => sb.exec('true', { timeout: -1 }), () => h.wait({ timeout: -5 }), () => h.ready({ port: 1, timeout: -1 })]) {
        const t0 = Date.now()
        await assert.rejects(call(), RangeError)
        assert.ok(Date.now() - t0 < 5000, 'a negative timeout waited')
      }
    } finally {
      await h.kill({ signal: 'KILL' })
    }
  })
})
