import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { isRunning, type RunResult, runDetails, type Sandbox } from '@conchsh/sdk'

import { type Daemon, recordingFetch, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon()
  sb = d.sandbox()
})
after(async () => d?.stop())

function seq(n: number): string {
  const lines: string[] = []
  for (let i = 1; i <= n; i++) lines.push(`${i}\n`)
  return lines.join('')
}

/** The index of the first character where a and b differ, or -1. */
function firstDifference(a: string, b: string): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i
  return -1
}

describe('run joins a bounded answer with the logs', () => {
  test('seq 1 400000 comes back whole: every byte once, in order', async () => {
    const want = seq(400_000)
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch })
    const r = await s.process.run('seq 1 400000')
    assert.deepEqual([r.reason, r.exitCode], ['exited', 0])
    assert.equal(r.stdout.length, want.length, `first difference at ${firstDifference(r.stdout, want)}`)
    assert.ok(r.stdout === want, `first difference at ${firstDifference(r.stdout, want)}`)
    assert.ok(r.output === want)
    assert.equal(r.logs.map((f) => f.data).join(''), want)
    const pages = rec.calls.filter((c) => c.path.includes('/logs?'))
    assert.ok(pages.length >= 2, `it read the omitted output over several pages: ${pages.length}`)
  })

  test('mixed stdout and stderr with multi-byte characters, over small pages', async () => {
    const n = 30_000
    let out = ''
    let err = ''
    for (let i = 1; i <= n; i++) {
      out += `ünï€ ${i}\n`
      if (i % 3 === 0) err += `err 😀 ${i}\n`
    }
    const rec = recordingFetch()
    const s = d.sandbox({ fetch: rec.fetch, logsPageSize: 7 })
    const cmd = `awk 'BEGIN{for(i=1;i<=${n};i++){print "ünï€ " i; if(i%3==0) print "err 😀 " i > "/dev/stderr"}}'`
    const r = await s.process.run(cmd)
    assert.ok(r.stdout === out, `stdout: first difference at ${firstDifference(r.stdout, out)} of ${out.length}`)
    assert.ok(r.stderr === err, `stderr: first difference at ${firstDifference(r.stderr, err)} of ${err.length}`)
    assert.equal(r.output.length, out.length + err.length)
    const all = await s.process.connect(r.processId).logs({ limit: 1_000_000 })
    assert.ok(all.items.length > 7, `the output crosses several chunks: ${all.items.length} frames`)
  })

  test('a run that answers 202 first pages the whole output from the start', async () => {
    const want = seq(400_000)
    const s = d.sandbox({ waitWindow: 100 })
    const r = await s.process.run('sleep 0.5; seq 1 400000')
    assert.deepEqual([r.reason, r.exitCode], ['exited', 0])
    assert.ok(r.stdout === want, `first difference at ${firstDifference(r.stdout, want)} of ${want.length}`)
  })

  test('invalid UTF-8 reads the same within the wait window and past it: one U+FFFD per maximal subpart', async () => {
    // Within the window the text is the daemon's; past it, run decodes the frames of the logs.
    const write = "printf 'a\\377\\376\\342\\202b\\355\\240\\200c'"
    const want = 'a\uFFFD\uFFFD\uFFFDb\uFFFD\uFFFD\uFFFDc'
    const within = await sb.process.run(`sleep 0.6; ${write}`, { timeout: 30_000 })
    const rec = recordingFetch()
    const past = await d.sandbox({ fetch: rec.fetch, waitWindow: 200 }).process.run(`sleep 0.6; ${write}`, { timeout: 30_000 })
    assert.equal(rec.calls[0]!.status, 202, 'the second run outlived the wait window')
    assert.ok(rec.calls.some((c) => c.path.includes('/logs?')), 'it read the output from the logs')
    for (const r of [within, past]) assert.deepEqual([r.reason, r.exitCode], ['exited', 0])
    assert.equal(within.stdout, want)
    assert.deepEqual([past.output, past.stdout], [within.output, within.stdout])
    assert.equal(within.output, want)
    // As TextDecoder reads the bytes the command wrote.
    assert.equal(new TextDecoder().decode(Buffer.from('61fffee28262eda08063', 'hex')), want)
  })

  test("output never makes a character of two channels' bytes, within the wait window or past it", async () => {
    // F0 9F 98 on stderr, then 80 on stdout: each is the start of a character cut, not 😀.
    const write = "printf '\\360\\237\\230' >&2; sleep 0.2; printf '\\200'"
    const within = await sb.process.run(`sleep 0.6; ${write}`, { timeout: 30_000 })
    const rec = recordingFetch()
    const past = await d.sandbox({ fetch: rec.fetch, waitWindow: 200 }).process.run(`sleep 0.6; ${write}`, { timeout: 30_000 })
    assert.equal(rec.calls[0]!.status, 202, 'the second run outlived the wait window')
    for (const r of [within, past]) {
      assert.deepEqual([r.output, r.stdout, r.stderr], ['\uFFFD\uFFFD', '\uFFFD', '\uFFFD'])
    }
  })

  test('a run that comes back early (idleTimeout) holds the whole output so far', async () => {
    const want = seq(400_000)
    const r = await sb.process.run('seq 1 400000; sleep 600', { idleTimeout: 1500 })
    try {
      assert.equal(r.reason, 'timed_out')
      assert.equal(r.rawReason, 'idle_timeout')
      assert.ok(r.stdout === want, `first difference at ${firstDifference(r.stdout, want)} of ${want.length}`)
      assert.equal((r as typeof r & { omittedBytes?: number }).omittedBytes, undefined)
    } finally {
      await sb.process.connect(r.processId).kill({ signal: 'KILL' })
    }
  })

  test('with outputLimit the answer stays bounded and says what it left out', async () => {
    const r = await sb.process.run('seq 1 20000', { outputLimit: 200 })
    const x = r as typeof r & { omittedBytes?: number; omittedAfter?: string }
    assert.ok(Buffer.byteLength(r.output) <= 200, `${Buffer.byteLength(r.output)} bytes`)
    assert.equal(x.omittedBytes, seq(20_000).length - Buffer.byteLength(r.output))
    assert.equal(typeof x.omittedAfter, 'string')
  })
})

describe('outputLimit bounds a run that outlives the wait window', () => {
  const limit = 1000

  /**
   * r is want cut as the daemon cuts it to limit: its head and its tail,
   * at most limit bytes, saying exactly what it left out.
   */
  function assertCut(r: RunResult, want: string, tail: string): void {
    const x = runDetails(r)
    const bytes = Buffer.byteLength(r.output)
    assert.ok(bytes <= limit, `output holds ${bytes} bytes over outputLimit ${limit}`)
    assert.ok(Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr) <= limit)
    assert.ok(r.output.startsWith('1\n2\n3\n'), `the head: ${JSON.stringify(r.output.slice(0, 40))}`)
    assert.ok(r.output.endsWith(tail), `the tail: ${JSON.stringify(r.output.slice(-40))}`)
    assert.equal(x.omittedBytes, Buffer.byteLength(want) - bytes)
    assert.equal(typeof x.omittedAfter, 'string')
    assert.ok((x.headFrames ?? 0) > 0, `headFrames: ${x.headFrames}`)
    assert.equal(r.logs.map((f) => f.data).join(''), r.output)
    assert.equal(x.next, r.logs[r.logs.length - 1]?.cursor)
  }

  test('a run that ends after the window: the head and tail within outputLimit', async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    const r = await s.process.run('seq 1 200000; sleep 2', { outputLimit: limit, timeout: 30_000 })
    assert.deepEqual([r.reason, r.exitCode, runDetails(r).state], ['exited', 0, 'terminal'])
    assertCut(r, seq(200_000), '199999\n200000\n')
  })

  test('a run that comes back idle after the window: the output so far within outputLimit', async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    const ticks = 'for i in 1 2 3 4; do sleep 1; echo tick $i; done'
    const r = await s.process.run(`seq 1 200000; ${ticks}; sleep 600`, { outputLimit: limit, idleTimeout: 1500, timeout: 30_000 })
    try {
      assert.ok(isRunning(r), JSON.stringify(r).slice(0, 300))
      assert.deepEqual([r.reason, r.rawReason, r.waitingForInput], ['timed_out', 'idle_timeout', false])
      assertCut(r, seq(200_000) + 'tick 1\ntick 2\ntick 3\ntick 4\n', 'tick 3\ntick 4\n')
    } finally {
      await s.process.connect(r.processId).delete()
    }
  })

  test("a run the caller's timeout ends after the window: the output so far within outputLimit", async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    const r = await s.process.run('seq 1 200000; sleep 600', { outputLimit: limit, timeout: 2500 })
    try {
      assert.ok(isRunning(r), JSON.stringify(r).slice(0, 300))
      assert.deepEqual([r.reason, r.rawReason], ['timed_out', 'wait_timeout'])
      assertCut(r, seq(200_000), '199999\n200000\n')
    } finally {
      await s.process.connect(r.processId).delete()
    }
  })

  test('a run that waits for input after the window: the output so far within outputLimit', async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    const r = await s.process.run(`seq 1 200000; sleep 2; printf 'go? '; read x`, { stdin: 'open', outputLimit: limit, timeout: 30_000 })
    try {
      assert.ok(isRunning(r), JSON.stringify(r).slice(0, 300))
      assert.deepEqual([r.reason, r.rawReason, r.waitingForInput], ['timed_out', 'waiting_for_input', true])
      assertCut(r, seq(200_000) + 'go? ', '200000\ngo? ')
    } finally {
      await s.process.connect(r.processId).delete()
    }
  })
})

describe('keepLogs none', () => {
  test('an answer over its limit keeps the head and tail the daemon sent, and says what it left out', async () => {
    const r = await sb.exec('seq 1 400000', { keepLogs: 'none' })
    assert.equal(r.reason, 'exited')
    assert.ok(((r as { omittedBytes?: number }).omittedBytes ?? 0) > 0, 'output was left out and the result does not say so')
    assert.ok(r.stdout.startsWith('1\n2\n3\n'))
    assert.ok(r.stdout.endsWith('400000\n'), 'the tail the daemon sent was dropped')
  })

  // Lines written over three wait windows: each answer holds what came while it waited.
  const lines = "for i in 1 2 3 4 5 6; do printf '\\033[31mred\\033[0m\\n'; sleep 0.5; done"

  test('a run past the wait window holds what its answers held, not nothing', async () => {
    const r = await d.sandbox({ waitWindow: 1000 }).process.run(lines, { keepLogs: 'none', timeout: 30_000 })
    assert.equal(r.exitCode, 0)
    assert.ok(r.stdout.startsWith('\x1b[31mred\x1b[0m\n'), JSON.stringify(r.stdout))
    assert.ok(r.stdout.split('red').length - 1 >= 4, JSON.stringify(r.stdout))
    assert.equal(r.logs.map((f) => f.data).join(''), r.stdout)
  })

  // Nothing is kept to cut the output from the start: the answers held it. The output comes in
  // the middle of the second request's window, not between two requests, where it is lost.
  test('outputLimit past the wait window is what the answers held', async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    for (const plain of [false, true]) {
      const r = await s.process.run('sleep 1.5; echo hello', { keepLogs: 'none', outputLimit: 100, plain, timeout: 30_000 }) as RunResult & Record<string, unknown>
      assert.deepEqual([r.reason, r.output, r.stdout, r.omittedBytes ?? 0, r.truncated], ['exited', 'hello\n', 'hello\n', 0, false], JSON.stringify(r))
    }
    const r = await s.process.run('sleep 1.5; seq 1 200000', { keepLogs: 'none', outputLimit: 1000, timeout: 30_000 }) as RunResult & Record<string, unknown>
    const whole = seq(200_000)
    assert.equal(r.reason, 'exited')
    assert.ok(Buffer.byteLength(r.output) <= 1000)
    if (r.truncated !== true) assert.equal(r.output.length + (r.omittedBytes as number), whole.length)
    assert.ok(whole.startsWith(r.output.slice(0, 400)), r.output.slice(0, 400))
    assert.ok(r.output.endsWith('200000\n'), r.output.slice(-100))
    assert.equal(typeof r.omittedAfter, 'string')
  })

  test('outputLimit holds several answers together to the limit', async () => {
    const s = d.sandbox({ waitWindow: 1000 })
    const whole = seq(100_000)
    for (const plain of [false, true]) {
      const r = await s.process.run('sleep 0.5; seq 1 50000; sleep 1; seq 50001 100000',
        { keepLogs: 'none', outputLimit: 1000, plain, timeout: 30_000 }) as RunResult & Record<string, unknown>
      assert.equal(r.reason, 'exited')
      for (const text of [r.output, r.stdout]) {
        assert.ok(Buffer.byteLength(text) <= 1000, `${plain}: ${Buffer.byteLength(text)}`)
        assert.ok(text.startsWith('1\n2\n3\n'), text.slice(0, 100))
        assert.ok(text.endsWith('\n99999\n100000\n'), text.slice(-100))
      }
      const held = r.logs.reduce((n, f) => n + Buffer.byteLength(f.data), 0)
      assert.ok(held <= 1000)
      assert.equal(typeof r.omittedAfter, 'string')
      assert.ok((r.headFrames as number) > 0)
      if (r.truncated !== true) assert.equal(held + (r.omittedBytes as number), whole.length)
    }
  })

  test('an answer cut past the wait window says what it left out', async () => {
    const r = await d.sandbox({ waitWindow: 1000 }).process.run('sleep 1.5; seq 1 400000', { keepLogs: 'none', timeout: 30_000 }) as RunResult & Record<string, unknown>
    const whole = seq(400_000)
    assert.equal(r.reason, 'exited')
    assert.ok(((r.omittedBytes as number | undefined) ?? 0) > 0, 'output was left out and the result does not say so')
    assert.equal(typeof r.omittedAfter, 'string')
    if (r.truncated !== true) assert.equal(r.stdout.length + (r.omittedBytes as number), whole.length)
    assert.ok(whole.startsWith(r.stdout.slice(0, 1000)))
    assert.ok(r.stdout.endsWith('400000\n'))
  })

  test('with plain, past the wait window, the text is plain', async () => {
    const r = await d.sandbox({ waitWindow: 1000 }).process.run(lines, { keepLogs: 'none', plain: true, timeout: 30_000 })
    assert.equal(r.exitCode, 0)
    assert.ok(r.stdout.startsWith('red\n'), JSON.stringify(r.stdout))
    assert.ok(!r.stdout.includes('\x1b') && !r.output.includes('\x1b'), 'the raw frames were taken for the plain text')
    assert.ok(r.stdout.split('red').length - 1 >= 4, JSON.stringify(r.stdout))
  })
})

describe('plain past the wait window', () => {
  test('the text is the daemon\'s plain text, not the raw frames of the logs', async () => {
    const r = await d.sandbox({ waitWindow: 1000 }).process.run("printf '\\033[31mred\\033[0m\\n'; sleep 1.5; printf '\\033[32mgreen\\033[0m\\n'", { plain: true, timeout: 30_000 })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'red\ngreen\n')
  })
})
