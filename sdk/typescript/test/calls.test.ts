// Request/response calls as an agent runtime makes them: the transport's
// bounds, input that UTF-8 cannot carry, and discovery from the state
// directory.

import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

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
