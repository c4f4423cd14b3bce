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
})
