import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { runDetails } from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'

// A process that writes on faster than its logs are paged back, under a
// small retention: the frames after those paged are dropped between pages.
// A run's join gives up (the answer's head and tail, omittedBytes saying
// what is missing), and a collect keeps the tail it can, marked truncated;
// neither pages on for ever, as they did while the writer ran.

let d: Daemon

before(async () => {
  d = await startDaemon(['--log-retention', '2M'])
})
after(async () => d?.stop())

/** A fetch whose logs pages, after the first, wait ms, as over a slow link. */
function slowLogs(ms: number): { fetch: typeof fetch; pages: () => number } {
  let pages = 0
  const f: typeof fetch = async (input, init) => {
    if (new URL(String(input)).pathname.endsWith('/logs') && ++pages > 1) await new Promise((r) => setTimeout(r, ms))
    return fetch(input, init)
  }
  return { fetch: f, pages: () => pages }
}

/** p, or a rejection after ms: the paging did not end. */
function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('paging the logs did not end')), ms)
  })
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

describe('a writer that outruns the paging of its logs', () => {
  test('the join of a run that came back gives up', async () => {
    const slow = slowLogs(100)
    const sb = d.sandbox({ fetch: slow.fetch, logsPageSize: 2 })
    const r = await bounded(sb.exec('while :; do seq 1 28000; sleep 0.02; done', { idleTimeout: 10_000, timeout: 300 }), 60_000)
    await sb.process.connect(r.processId).delete()
    assert.ok(slow.pages() > 1, `the join gave up at its first page (${slow.pages()}): no later page was dropped`)
    assert.ok((runDetails(r).omittedBytes ?? 0) > 0, 'the join reads whole')
  })

  test('what a run collects keeps the tail, with no hole', async () => {
    const slow = slowLogs(20)
    const sb = d.sandbox({ fetch: slow.fetch, logsPageSize: 5, waitWindow: 100 })
    const r = await bounded(sb.exec('while :; do seq 1 20000; done', { timeout: 300 }), 60_000)
    await sb.process.connect(r.processId).delete()
    assert.equal(runDetails(r).truncated, true)
    const nums = r.stdout.split('\n').slice(1, -1)
    for (let i = 1; i < nums.length; i++) {
      assert.equal(Number(nums[i]), (Number(nums[i - 1]) % 20000) + 1, `a hole between ${nums[i - 1]} and ${nums[i]}`)
    }
  })
})
