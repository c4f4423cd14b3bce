import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { after, before, describe, test } from 'node:test'

import { DeadlineExceededError, InvalidArgumentError, type LogFrame, Sandbox, type StreamLogEvent } from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'
import { startProxy } from './proxy.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon(['--log-retention', '16K'])
  sb = d.sandbox()
})
after(async () => d?.stop())

async function collect(events: AsyncIterable<StreamLogEvent>): Promise<StreamLogEvent[]> {
  const out: StreamLogEvent[] = []
  for await (const ev of events) out.push(ev)
  return out
}

const lines = (n: number): string => Array.from({ length: n }, (_, i) => `line ${i + 1}\n`).join('')

describe('ProcessHandle.streamLogs', () => {
  test('yields log frames live, then state and eof, then ends', async () => {
    const h = await sb.process.start('echo one; sleep 0.2; echo two >&2; exit 2')
    const evs = await collect(h.streamLogs())
    assert.deepEqual(evs.map((e) => e.type), ['log', 'log', 'state', 'eof'])
    const logs = evs.flatMap((e) => (e.type === 'log' ? [e.frame] : []))
    assert.deepEqual(logs.map((f) => [f.channel, f.data]), [['stdout', 'one\n'], ['stderr', 'two\n']])
    assert.equal(evs[0]!.cursor, logs[0]!.cursor)
    const st = evs[2]!
    assert.ok(st.type === 'state' && st.result.reason === 'exited' && st.result.exitCode === 2)
  })

  test('cursor starts after a frame; limit ends after that many frames; base64 encoding', async () => {
    const r = await sb.process.run('echo a; sleep 0.05; echo b; sleep 0.05; echo c')
    const [a, b] = r.logs
    const after = await collect(sb.process.connect(r.processId).streamLogs({ cursor: a!.cursor }))
    assert.deepEqual(after.flatMap((e) => (e.type === 'log' ? [e.frame.data] : [])), ['b\n', 'c\n'])
    const limited = await collect(sb.process.connect(r.processId).streamLogs({ limit: 2 }))
    assert.deepEqual(limited.map((e) => e.type === 'log' && e.frame.cursor), [a!.cursor, b!.cursor])
    const enc = await collect(sb.process.connect(r.processId).streamLogs({ encoding: 'base64', limit: 1 }))
    assert.ok(enc[0]!.type === 'log' && enc[0]!.frame.encoding === 'base64' && enc[0]!.frame.data === 'YQo=')
  })

  test('a limit that is not a non-negative integer is refused as logs refuses it, and nothing is streamed', async () => {
    const r = await sb.process.run('echo a; sleep 0.05; echo b; sleep 0.05; echo c')
    const h = sb.process.connect(r.processId)
    for (const limit of [-1, 2.5, Number.NaN, Infinity]) {
      const want = await h.logs({ limit }).then(() => assert.fail(`logs took limit ${limit}`), (err: unknown) => err)
      assert.ok(want instanceof InvalidArgumentError, `logs, limit ${limit}: ${String(want)}`)
      const evs = await collect(h.streamLogs({ limit }))
      assert.equal(evs.length, 1, `limit ${limit}: ${JSON.stringify(evs.map((e) => e.type))}`)
      const ev = evs[0]!
      assert.ok(ev.type === 'error' && ev.error instanceof InvalidArgumentError, `limit ${limit}: ${String(ev.type === 'error' && ev.error)}`)
      assert.equal(ev.error.message, want.message)
      assert.equal(ev.error.status, 400)
    }
    const all = await collect(h.streamLogs({ limit: 0 }))
    assert.equal(all.filter((e) => e.type === 'log').length, 3, 'limit 0 is no bound')
  })

  test('a signal ends the stream of a running process', async () => {
    const h = await sb.process.start('echo x; sleep 30')
    const ac = new AbortController()
    const seen: string[] = []
    for await (const ev of h.streamLogs({ signal: ac.signal })) {
      seen.push(ev.type)
      if (ev.type === 'log') ac.abort()
    }
    assert.deepEqual(seen, ['log'])
    await h.kill({ signal: 'KILL' })
  })

  test('a signal aborted already ends the stream before it starts', async () => {
    const h = await sb.process.start('echo x; sleep 0.3; echo y')
    const evs = await collect(h.streamLogs({ signal: AbortSignal.abort() }))
    assert.deepEqual(evs, [])
    await assert.rejects(h.wait({ signal: AbortSignal.abort() }), (err: Error) => err.name === 'AbortError')
    await h.wait()
  })

  test('a connection cut mid-way resumes: no frame twice, none missing', async () => {
    const proxy = await startProxy(d.url)
    try {
      const s = d.sandbox({ url: proxy.url })
      const h = await s.process.start('for i in $(seq 1 400); do echo "line $i"; [ $((i % 50)) = 0 ] && sleep 0.05; done')
      proxy.cutAfter(3001) // the answer's headers and some events, then a cut in the middle of one
      const evs = await collect(h.streamLogs())
      assert.equal(proxy.cuts, 1, 'the stream was cut')
      assert.equal(proxy.streams, 2, 'the stream was asked again once')
      const frames = evs.flatMap((e) => (e.type === 'log' ? [e.frame] : []))
      assert.deepEqual(evs.slice(-2).map((e) => e.type), ['state', 'eof'])
      assert.ok(!evs.some((e) => e.type === 'error' || e.type === 'warning'))
      // What the daemon still retains (a 16K retention keeps at most 128
      // frames) is the tail of what the stream yielded, cursor for cursor.
      const all: LogFrame[] = (await h.logs()).items
      assert.ok(all.length > 0)
      assert.deepEqual(frames.slice(-all.length).map((f) => f.cursor), all.map((f) => f.cursor))
      assert.equal(new Set(frames.map((f) => f.cursor)).size, frames.length, 'no frame twice')
      assert.equal(frames.map((f) => f.data).join(''), lines(400))
    } finally {
      await proxy.close()
    }
  })

  test('a stream resumed at the last frame of an ended process (204) gives its state and eof', async () => {
    const r = await sb.process.run('echo a; echo b; exit 4')
    const last = r.logs.at(-1)!.cursor
    const evs = await collect(sb.process.connect(r.processId).streamLogs({ cursor: last }))
    assert.deepEqual(evs.map((e) => e.type), ['state', 'eof'])
    const st = evs[0]!
    assert.ok(st.type === 'state' && st.result.reason === 'exited' && st.result.exitCode === 4, JSON.stringify(st))
    assert.equal(evs[1]!.cursor, last)
  })

  test('a stream cut after its state, of a process that wrote nothing, gives state once', async () => {
    // With no frame to resume after, a stream asked again without a
    // cursor is sent the state again: only eof was left to come.
    const proxy = await startProxy(d.url)
    try {
      const s = d.sandbox({ url: proxy.url })
      const h = await s.process.start('exit 4')
      await h.wait()
      proxy.cutBefore('event: eof')
      const evs = await collect(h.streamLogs())
      assert.equal(proxy.cuts, 1, 'the stream was cut')
      assert.deepEqual(evs.map((e) => e.type), ['state', 'eof'])
      const st = evs[0]!
      assert.ok(st.type === 'state' && st.result.reason === 'exited' && st.result.exitCode === 4, JSON.stringify(st))
    } finally {
      await proxy.close()
    }
  })

  for (const before of ['event: state', 'event: eof']) {
    test(`a stream cut before its "${before}" resumes to a 204 and still gives state and eof`, async () => {
      const proxy = await startProxy(d.url)
      try {
        const s = d.sandbox({ url: proxy.url })
        const h = await s.process.start('echo one; sleep 0.2; echo two; exit 3')
        proxy.cutBefore(before)
        const evs = await collect(h.streamLogs())
        assert.equal(proxy.cuts, 1, 'the stream was cut')
        assert.deepEqual(evs.map((e) => e.type), ['log', 'log', 'state', 'eof'])
        const st = evs[2]!
        assert.ok(st.type === 'state' && st.result.reason === 'exited' && st.result.exitCode === 3, JSON.stringify(st))
        assert.equal(evs[3]!.cursor, evs[1]!.cursor)
      } finally {
        await proxy.close()
      }
    })
  }

  // The daemon's answer past --max-streams, which has no Retry-After.
  const exhausted = {
    status: 429,
    body: '{"error":{"code":"resource_exhausted","message":"1 streams and attachments are open, the most at once (--max-streams): close one, or page the logs"}}',
    headers: { 'content-type': 'application/json' },
  }

  for (const status of [502, 503, 429]) {
    test(`a resume answered ${status} is tried again, honouring Retry-After`, async () => {
      const proxy = await startProxy(d.url)
      try {
        const s = d.sandbox({ url: proxy.url })
        const h = await s.process.start('echo one; sleep 0.5; echo two; exit 3')
        proxy.cutBefore('two') // in the middle of the second frame's event
        proxy.failStream(2, status === 503
          ? { status, body: '{"error":{"code":"draining","message":"the daemon drains"}}', headers: { 'content-type': 'application/json', 'retry-after': '1' } }
          : status === 429 ? exhausted
          : { status, body: '<html>Bad Gateway</html>', headers: { 'content-type': 'text/html' } })
        const t0 = Date.now()
        const evs = await collect(h.streamLogs())
        assert.equal(proxy.streams, 3, 'cut, refused, then resumed')
        assert.deepEqual(evs.map((e) => e.type === 'log' ? e.frame.data : e.type), ['one\n', 'two\n', 'state', 'eof'])
        if (status === 503) assert.ok(Date.now() - t0 >= 1000, 'waited as Retry-After said')
      } finally {
        await proxy.close()
      }
    })
  }

  // A first request refused is the caller's to handle, as any other call's
  // refusal is (and as the Go client and the Python SDK do): only a resume
  // is tried again.
  for (const [status, name] of [[429, 'ResourceExhaustedError'], [502, 'UnexpectedResponseError'], [503, 'DrainingError'], [504, 'UnexpectedResponseError']] as const) {
    test(`a stream whose first request is answered ${status} yields one error event at once`, async () => {
      const proxy = await startProxy(d.url)
      try {
        const s = d.sandbox({ url: proxy.url })
        const h = await s.process.start('echo one')
        proxy.failStream(1, status === 429 ? exhausted
          : status === 503 ? { status, body: '{"error":{"code":"draining","message":"the daemon drains"}}', headers: { 'content-type': 'application/json', 'retry-after': '1' } }
          : { status, body: '<html>Bad Gateway</html>', headers: { 'content-type': 'text/html' } })
        const evs = await collect(h.streamLogs())
        assert.equal(proxy.streams, 1, 'not asked again')
        assert.equal(evs.length, 1)
        const ev = evs[0]!
        assert.ok(ev.type === 'error' && ev.error.name === name && (ev.error as { status?: number }).status === status, String(ev.type === 'error' ? ev.error : ev.type))
        await h.wait()
      } finally {
        await proxy.close()
      }
    })
  }

  // A first request that cannot be sent is the caller's to handle, as any
  // other call's is (and as the Go client and the Python SDK do): only a
  // resume is tried again.
  test('a stream whose first request cannot be sent yields one error event at once', async () => {
    const h = await sb.process.start('echo one')
    const proxy = await startProxy(d.url)
    try {
      proxy.refuse() // every connection closed before an answer
      const evs = await collect(d.sandbox({ url: proxy.url }).process.connect(h.id).streamLogs())
      assert.equal(proxy.connections, 1, 'not asked again')
      assert.deepEqual(evs.map((e) => e.type), ['error'])
      assert.ok(evs[0]!.type === 'error' && evs[0]!.error instanceof TypeError, String(evs[0]))
    } finally {
      await proxy.close()
    }
    // No daemon at the address at all: the same.
    const evs = await collect(d.sandbox({ url: proxy.url }).process.connect(h.id).streamLogs())
    assert.deepEqual(evs.map((e) => e.type), ['error'])
    await h.wait()
  })

  test('a stream whose first answer is not the API\'s (status 0: a redirect a browser hides) yields one error event at once', async () => {
    let streams = 0
    const fetch = (async (input: string | URL | Request) => {
      if (String(input).includes('/logs/stream')) streams++
      return { type: 'opaqueredirect', status: 0, headers: new Headers() } as unknown as Response
    }) as typeof globalThis.fetch
    const evs = await collect(new Sandbox({ url: d.url, token: 't', fetch }).process.connect('p').streamLogs())
    assert.equal(streams, 1, 'not asked again')
    assert.deepEqual(evs.map((e) => e.type), ['error'])
    assert.ok(evs[0]!.type === 'error' && evs[0]!.error.name === 'UnexpectedResponseError', String(evs[0]))
  })

  test('a stream that cannot resume yields one error event and ends', async () => {
    const proxy = await startProxy(d.url)
    try {
      const s = d.sandbox({ url: proxy.url })
      const h = await s.process.start('echo first; sleep 30')
      const evs: StreamLogEvent[] = []
      for await (const ev of h.streamLogs()) {
        evs.push(ev)
        if (ev.type === 'log') {
          proxy.refuse()
          await proxy.close() // cuts the live connection; no new one is served
        }
      }
      assert.deepEqual(evs.map((e) => e.type), ['log', 'error'])
      const err = evs[1]!
      assert.ok(err.type === 'error' && err.error instanceof Error)
      assert.equal(err.cursor, (evs[0] as { cursor?: string }).cursor)
      await sb.process.connect(h.id).kill({ signal: 'KILL' })
    } finally {
      await proxy.close().catch(() => {})
    }
  })

  test('a stream of a deleted process yields an error event', async () => {
    const h = await sb.process.start('sleep 30')
    await h.delete()
    const evs = await collect(h.streamLogs())
    assert.equal(evs.length, 1)
    assert.ok(evs[0]!.type === 'error' && evs[0]!.error.name === 'NotFoundError')
  })

  test('a stream from before what is retained warns first; run and logs say the head was dropped', async () => {
    const r = await sb.process.run('seq 1 20000')
    assert.equal((r as { truncated?: boolean }).truncated, true)
    assert.ok(r.stdout.endsWith('19999\n20000\n') && !r.stdout.startsWith('1\n'))
    const h = sb.process.connect(r.processId)
    const page = await h.logs({ limit: 1 })
    assert.equal(page.truncatedHead, true)
    assert.equal(page.firstAvailableCursor, page.items[0]!.cursor)
    const evs = await collect(h.streamLogs())
    const first = evs[0]!
    assert.ok(first.type === 'warning' && first.message.length > 0 && first.firstAvailableCursor === page.items[0]!.cursor)
    assert.deepEqual(evs.slice(-2).map((e) => e.type), ['state', 'eof'])
    const fallback = await d.sandbox({ waitWindow: 50, logsPageSize: 3 }).process.run('sleep 0.3; seq 1 20000')
    assert.equal((fallback as { truncated?: boolean }).truncated, true)
    const kept = await sb.process.connect(fallback.processId).logs()
    assert.equal(fallback.stdout, kept.items.map((f) => f.data).join(''))
    assert.ok(fallback.stdout.endsWith('19999\n20000\n'))
  })
})

describe('a stream the daemon goes quiet on', () => {
  // A server of the test's own that answers the stream route as the test
  // says: headers, then what it writes, then, unless it ends the answer,
  // nothing (a daemon frozen with SIGSTOP, without the wait).
  let server: Server
  let url: string
  let streams = 0
  let serve: (res: ServerResponse) => void = () => {}
  const open = new Set<ServerResponse>()

  before(async () => {
    server = createServer((_req: IncomingMessage, res: ServerResponse) => {
      streams++
      open.add(res)
      res.on('close', () => open.delete(res))
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      res.flushHeaders()
      serve(res)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const a = server.address()
    url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`
  })
  after(() => {
    for (const res of open) res.destroy()
    return new Promise<void>((r) => server.close(() => r()))
  })

  const frame = (cursor: string, data: string): string =>
    `id: ${cursor}\nevent: log\ndata: ${JSON.stringify({ cursor, channel: 'stdout', data })}\n\n`
  const eof = 'event: eof\ndata: {}\n\n'
  /** Hang guard: a stream that should end within a second or two. */
  const guard = 20_000

  async function collectWithin(events: AsyncIterable<StreamLogEvent>, onEvent?: (ev: StreamLogEvent) => Promise<void>): Promise<StreamLogEvent[]> {
    const out: StreamLogEvent[] = []
    const all = (async () => {
      for await (const ev of events) {
        out.push(ev)
        await onEvent?.(ev)
      }
      return out
    })()
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the stream did not end within ${guard} ms: ${JSON.stringify(out)}`)), guard)
    })
    try {
      return await Promise.race([all, late])
    } finally {
      clearTimeout(timer)
    }
  }

  test('nothing, not even a heartbeat, for streamIdleTimeout: one error event (DeadlineExceededError), no new connection', async () => {
    assert.equal(new Sandbox({ url, token: 't' }).transport.streamIdleTimeout, 45_000, 'the default: three of the daemon\'s 15 s heartbeats')
    streams = 0
    serve = (res) => res.write(frame('c1', 'one\n'))
    const s = new Sandbox({ url, token: 't', streamIdleTimeout: 300 })
    const evs = await collectWithin(s.process.connect('p').streamLogs())
    assert.deepEqual(evs.map((e) => e.type), ['log', 'error'])
    const e = evs[1]!
    assert.ok(e.type === 'error' && e.error instanceof DeadlineExceededError, String(e.type === 'error' && e.error))
    assert.equal(e.error.code, 'deadline_exceeded')
    assert.match(e.error.message, /nothing .*not even a heartbeat.* within 300 ms/)
    assert.equal(e.cursor, 'c1')
    assert.equal(streams, 1, 'it waited as long again on a new connection')
    // Headers, then not even the first event: the same.
    serve = () => {}
    const none = await collectWithin(s.process.connect('p').streamLogs())
    assert.deepEqual(none.map((e) => e.type), ['error'])
  })

  test('a streamIdleTimeout of Infinity (or past what a timer holds) is no bound', async () => {
    // A quiet stream of 300 ms, no heartbeat: a timer given Infinity fires at once.
    serve = (res) => {
      res.write(frame('c1', 'one\n'))
      setTimeout(() => res.end(frame('c2', 'two\n') + eof), 300)
    }
    for (const streamIdleTimeout of [Infinity, 2 ** 31]) {
      const s = new Sandbox({ url, token: 't', streamIdleTimeout })
      const evs = await collectWithin(s.process.connect('p').streamLogs())
      assert.deepEqual(evs.map((e) => e.type === 'log' ? e.frame.data : e.type), ['one\n', 'two\n', 'eof'], String(streamIdleTimeout))
    }
  })

  test('a signal aborted mid-stream ends it before the events already received', async () => {
    // Three frames in one write: they reach the SDK in one chunk, and
    // abort() after the first must not let the other two through.
    serve = (res) => res.write(frame('c1', 'one\n') + frame('c2', 'two\n') + frame('c3', 'three\n'))
    const s = new Sandbox({ url, token: 't' })
    const ac = new AbortController()
    const evs = await collectWithin(s.process.connect('p').streamLogs({ signal: ac.signal }), async () => ac.abort())
    assert.deepEqual(evs.map((e) => e.type === 'log' ? e.frame.data : e.type), ['one\n'])
  })

  /** A stream of frame c1, then a heartbeat every 50 ms for ms, then frame c2 and eof. */
  const beating = (ms: number) => (res: ServerResponse) => {
    res.write(frame('c1', 'one\n'))
    const beat = setInterval(() => res.write(': ping\n\n'), 50)
    setTimeout(() => {
      clearInterval(beat)
      res.end(frame('c2', 'two\n') + eof)
    }, ms)
    res.on('close', () => clearInterval(beat))
  }

  test('heartbeats keep a quiet stream open, and a reader slow to take an event is not a quiet daemon', async () => {
    serve = beating(1500)
    // Heartbeats 20 times as often as the stream may be quiet.
    const s = new Sandbox({ url, token: 't', streamIdleTimeout: 1000 })
    const evs = await collectWithin(s.process.connect('p').streamLogs())
    assert.deepEqual(evs.map((e) => e.type === 'log' ? e.frame.data : e.type), ['one\n', 'two\n', 'eof'])
    // The reader holds the first event twice as long as the stream may be quiet; the rest came meanwhile.
    serve = (res) => {
      res.write(frame('c1', 'one\n'))
      setTimeout(() => res.end(frame('c2', 'two\n') + eof), 100)
    }
    const slow = await collectWithin(s.process.connect('p').streamLogs(), async (ev) => {
      if (ev.type === 'log' && ev.frame.cursor === 'c1') await new Promise((r) => setTimeout(r, 2000))
    })
    assert.deepEqual(slow.map((e) => e.type === 'log' ? e.frame.data : e.type), ['one\n', 'two\n', 'eof'])
  })

  test('this process held up past streamIdleTimeout is not a quiet daemon: what came meanwhile is read first', async () => {
    // The daemon keeps writing heartbeats; this process runs none of its
    // callbacks for 1.5 s, twice streamIdleTimeout (a loaded machine, a long
    // synchronous task). When it runs again, the quiet timer is due, and a
    // heartbeat waits to be read (here written by the stub, in this
    // process, as its own timer comes due first).
    serve = beating(2500)
    const s = new Sandbox({ url, token: 't', streamIdleTimeout: 750 })
    const evs = await collectWithin(s.process.connect('p').streamLogs(), async (ev) => {
      if (ev.type === 'log' && ev.frame.cursor === 'c1') {
        setTimeout(() => {
          const until = Date.now() + 1500
          while (Date.now() < until) { /* held up */ }
        }, 200)
      }
    })
    assert.deepEqual(evs.map((e) => e.type === 'log' ? e.frame.data : e.type), ['one\n', 'two\n', 'eof'])
  })
})

describe('ProcessHandle.ready', () => {
  test('says truncated when output the pattern was to be matched against was dropped first', async () => {
    const dropped = await sb.process.start('echo READY; head -c 100000 /dev/zero')
    await dropped.wait()
    const r = await dropped.ready({ pattern: 'READY', timeout: 20_000 })
    assert.ok(!r.ready && r.truncated === true, JSON.stringify(r))
    const kept = await sb.process.start('echo nope')
    await kept.wait()
    const k = await kept.ready({ pattern: 'READY', timeout: 20_000 })
    assert.ok(!k.ready && !k.truncated, JSON.stringify(k))
  })
})
