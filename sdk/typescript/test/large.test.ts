// Tens of MB of output paged back from the logs: the SDK assembles it a
// piece at a time, so that the process's event loop keeps turning (its
// timers, its other requests), and the result is that of a decode in one
// go.

import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { type Sandbox } from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon(['--log-retention', '128M'])
  sb = d.sandbox({ requestTimeout: 120_000 })
})
after(async () => d?.stop())

/**
 * The longest the event loop was held while f ran (ms): how late a timer
 * set to fire every 10 ms came, at worst, counting only the CPU time this
 * process spent meanwhile. A machine loaded by others delays the timer
 * too, without this process holding its event loop: of the wall-clock
 * wait, only what this process ran counts.
 */
async function longestStall(f: () => Promise<void>): Promise<number> {
  const cpu = (): number => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  let last = performance.now()
  let lastCPU = cpu()
  let worst = 0
  const timer = setInterval(() => {
    const now = performance.now()
    const used = cpu()
    worst = Math.max(worst, Math.min(now - last - 10, used - lastCPU))
    last = now
    lastCPU = used
  }, 10)
  try {
    await f()
    // A stall at the very end is seen only once the timer has fired after it.
    await new Promise((resolve) => setTimeout(resolve, 30))
  } finally {
    clearInterval(timer)
  }
  return worst
}

const size = 50_000_000
const command = `head -c ${size} /dev/zero | tr '\\0' a`
/**
 * The longest hold allowed (ms): several times what a piece of the work
 * and a garbage collection take, and less than assembling the output in
 * one go took (230 ms and more, on a machine where a piece took under 60).
 */
const bound = 150

describe('a run of tens of MB of output', () => {
  test('paged back from the logs, it is assembled without holding the event loop', { timeout: 180_000 }, async () => {
    let output = ''
    const stall = await longestStall(async () => {
      const r = await sb.process.run(command, { timeout: 120_000 })
      assert.deepEqual([r.reason, r.exitCode, 'omittedBytes' in r], ['exited', 0, false])
      output = r.output
      assert.equal(r.stdout.length, size)
    })
    assert.equal(output.length, size)
    assert.ok(/^a*$/.test(output))
    assert.ok(stall < bound, `the event loop was held ${Math.round(stall)} ms`)
  })
})

describe('output paged back from the logs', () => {
  test('is decoded as in one go: characters split between frames, each channel on its own, invalid bytes replaced', { timeout: 60_000 }, async () => {
    const r = await sb.process.run("yes é | head -n 1000000 | tr -d '\\n'; printf '\\377'; printf 'ü' >&2", { timeout: 50_000 })
    assert.deepEqual([r.reason, r.exitCode, 'omittedBytes' in r], ['exited', 0, false])
    assert.ok(r.logs.length > 10, `${r.logs.length} frames`)
    const stdout = 'é'.repeat(1_000_000) + '\ufffd'
    assert.ok(r.stdout === stdout, r.stdout.slice(-10))
    assert.equal(r.stderr, 'ü')
    assert.ok(r.output === stdout + 'ü', r.output.slice(-10))
  })
})
