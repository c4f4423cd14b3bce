import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
    // The writer writes when told, so that the test holds at any rate it
    // writes: a burst (seq's 1.6 MB) that the answer cannot hold (its
    // default limit is 1 MiB, the logs keep 2 MiB), then, once the join has
    // paged its first page whole, a flood until the frames after that page
    // are dropped (the second page waits for it), and on: a join that did
    // not give up would page for ever. (Before, a writer that wrote on at
    // its own rate held only within a window of rates: too slow, and the
    // answer held all of it; too fast, and the first page found frames
    // dropped.)
    const dir = mkdtempSync(join(tmpdir(), 'conch-outrun-'))
    const flood = join(dir, 'flood')
    let pages = 0
    const f: typeof fetch = async (input, init) => {
      if (!new URL(String(input)).pathname.endsWith('/logs') || ++pages === 1) return fetch(input, init)
      writeFileSync(flood, '')
      const deadline = Date.now() + 30_000
      for (;;) {
        const res = await fetch(input, init)
        const text = await res.text()
        if (JSON.parse(text).truncatedHead === true || Date.now() > deadline) {
          return new Response(text, { status: res.status, headers: res.headers })
        }
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    const sb = d.sandbox({ fetch: f, logsPageSize: 2 })
    try {
      const r = await bounded(sb.exec(`seq 1 250000; while :; do if [ -e ${flood} ]; then seq 1 40000; else sleep 0.01; fi; done`,
        { idleTimeout: 10_000, timeout: 2000 }), 60_000)
      await sb.process.connect(r.processId).delete()
      assert.ok(pages > 1, `the join gave up at its first page (${pages}): no later page was dropped`)
      assert.ok((runDetails(r).omittedBytes ?? 0) > 0, 'the join reads whole')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('what a run collects keeps the tail, with no hole', async () => {
    const slow = slowLogs(20)
    const sb = d.sandbox({ fetch: slow.fetch, logsPageSize: 5, waitWindow: 100 })
    // One seq, which writes tens of MB a second on a busy machine too: the
    // 2 MiB the logs keep are passed within the wait (a loop of short ones
    // wrote too slowly there).
    const r = await bounded(sb.exec('seq 1 1000000000', { timeout: 300 }), 60_000)
    await sb.process.connect(r.processId).delete()
    assert.equal(runDetails(r).truncated, true)
    const nums = r.stdout.split('\n').slice(1, -1)
    for (let i = 1; i < nums.length; i++) {
      assert.equal(Number(nums[i]), Number(nums[i - 1]) + 1, `a hole between ${nums[i - 1]} and ${nums[i]}`)
    }
  })
})
