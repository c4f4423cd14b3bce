import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { WebSocketServer, WebSocket as WS } from 'ws'

import { createHash } from 'node:crypto'
import { createServer, request, type Server } from 'node:http'
import type { Socket } from 'node:net'

import {
  ConchError, DeadlineExceededError, NotFoundError, PtyDuplex, PtyGapError, PtyInputFullError, Sandbox, UnexpectedResponseError,
  UnsupportedOperationError,
} from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  d = await startDaemon()
  sb = d.sandbox()
})
after(async () => d?.stop())

/** Reads c until its text contains want; returns all it read. Does not end the iteration's source. */
async function readUntil(it: AsyncIterator<Uint8Array>, want: string): Promise<string> {
  const dec = new TextDecoder()
  let text = ''
  while (!text.includes(want)) {
    const { value, done } = await it.next()
    if (done) throw new Error(`ended before ${JSON.stringify(want)}: ${JSON.stringify(text)}`)
    text += dec.decode(value, { stream: true })
  }
  return text
}

/** p, or a rejection saying what did not settle within ms: a test fails rather than hangs. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms)))
  try {
    return await Promise.race([p, late])
  } finally {
    clearTimeout(timer)
  }
}

/** A ws WebSocket class for a sandbox, and the socket it made last: a test closes or watches it. */
function keptSocket(): { WebSocket: new (url: string, init: { headers: Record<string, string> }) => WS; socket(): WS | undefined } {
  let socket: WS | undefined
  const Kept = class extends WS {
    constructor(url: string, init: { headers: Record<string, string> }) {
      super(url, init)
      socket = this
    }
  }
  return { WebSocket: Kept, socket: () => socket }
}

async function readAll(it: AsyncIterator<Uint8Array>): Promise<string> {
  const dec = new TextDecoder()
  let text = ''
  for (;;) {
    const { value, done } = await it.next()
    if (done) return text
    text += dec.decode(value, { stream: true })
  }
}

describe('PtyService', () => {
  test('attach with two readers: both see the replay and live output, and end with the process', async () => {
    const { handle, connection } = await sb.pty.attach('echo ready; read line; echo "got:$line"; stty size', {
      terminal: { cols: 100, rows: 30 }, name: 'tty',
    })
    assert.ok(connection instanceof PtyDuplex)
    assert.equal(handle.kind, 'pty')
    const a = connection.readable[Symbol.asyncIterator]()
    await readUntil(a, 'ready')
    const second = await handle.attach()
    const b = second.readable[Symbol.asyncIterator]()
    assert.match(await readUntil(b, 'ready'), /ready/, 'the second reader gets the retained output')
    await handle.resize(120, 40)
    const p = await handle.get()
    assert.deepEqual(p.terminal, { cols: 120, rows: 40 })
    assert.equal(p.stdin, 'open')
    connection.write('hello\r')
    const [ta, tb] = await Promise.all([readAll(a), readAll(b)])
    for (const t of [ta, tb]) {
      assert.match(t, /got:hello/)
      assert.match(t, /40 120/)
    }
    const w = await handle.wait()
    assert.deepEqual([w.reason, w.exitCode], ['exited', 0])
  })

  test('one reader of a readable at a time: a second at once throws, one after it goes on where it stopped', async () => {
    const { handle, connection } = await sb.pty.attach('stty -echo; echo ready; read a; echo "got:$a"; read b; echo "then:$b"')
    const dec = new TextDecoder()
    let seen = ''
    let saw = (): void => {}
    const ready = new Promise<void>((r) => (saw = r))
    const first = (async () => {
      for await (const chunk of connection.readable) {
        seen += dec.decode(chunk, { stream: true })
        if (seen.includes('ready')) saw()
        if (seen.includes('got:x')) break
      }
      return seen
    })()
    await within(ready, 10_000, 'the first reader')
    // The first waits for more; a second loop at the same time is refused, at once.
    const second = (async () => {
      for await (const _ of connection.readable) return 'read'
      return 'ended'
    })()
    await assert.rejects(within(second, 2000, 'the second reader'), /read by another iteration already/)
    assert.throws(() => connection.readable[Symbol.asyncIterator](), /read by another iteration already/)
    connection.write('x\r')
    assert.match(await within(first, 10_000, 'the first reader, after the second was refused'), /got:x/)
    // The first ended (break): another iteration reads on from there.
    const it = connection.readable[Symbol.asyncIterator]()
    connection.write('y\r')
    const rest = await within(readAll(it), 10_000, 'the reader after the first')
    assert.match(rest, /then:y/)
    assert.doesNotMatch(rest, /ready|got:x/)
    const w = await handle.wait()
    assert.deepEqual([w.reason, w.exitCode], ['exited', 0])
  })

  test('return() on a readable\'s iteration settles the read it had pending, and frees the readable', async () => {
    const listeners: Record<string, ((ev: { type: string; data?: unknown; code?: number }) => void)[]> = {}
    const socket = {
      binaryType: '', send() {}, close() {},
      addEventListener(type: string, l: (ev: { type: string; data?: unknown; code?: number }) => void) {
        ;(listeners[type] ??= []).push(l)
      },
    }
    const c = new PtyDuplex(socket)
    const it = c.readable[Symbol.asyncIterator]()
    const pending = it.next()
    assert.deepEqual(await within(it.return!(), 2000, 'return()'), { done: true, value: undefined })
    assert.deepEqual(await within(pending, 2000, 'the pending read'), { done: true, value: undefined })
    // The next iteration reads; its next() calls that overlap take their turns.
    const again = c.readable[Symbol.asyncIterator]()
    const reads = [again.next(), again.next(), again.next()]
    for (const word of ['after', 'more']) {
      for (const l of listeners.message ?? []) l({ type: 'message', data: new TextEncoder().encode(word).buffer })
    }
    for (const l of listeners.close ?? []) l({ type: 'close', code: 1000 })
    const got = await within(Promise.all(reads), 2000, 'the next iteration')
    assert.deepEqual(got.map((r) => (r.done ? 'end' : new TextDecoder().decode(r.value))), ['after', 'more', 'end'])
  })

  test('start runs the shell when there is no command; bytes written, close leaves it running', async () => {
    const h = await sb.pty.start(undefined, { shell: 'dash', env: { PS1: '$ ' } })
    const c = await h.attach()
    c.write(new TextEncoder().encode('echo $((6*7))\r'))
    const it = c.readable[Symbol.asyncIterator]()
    await readUntil(it, '42')
    c.close()
    // At once, not only once the socket said it closed: nothing written now could arrive.
    assert.throws(() => c.write('echo lost\r'), /closed PTY connection/)
    await readAll(it) // what had arrived before the close, then the end
    assert.equal((await h.get()).state, 'running')
    await h.stdin('exit 3\r')
    const w = await h.wait({ timeout: 10_000 })
    assert.deepEqual([w.reason, w.exitCode], ['exited', 3])
  })

  test('list, connect and delete', async () => {
    const h = await sb.pty.start('sleep 30')
    const listed = await sb.pty.list()
    assert.ok(listed.items.some((p) => p.id === h.id))
    assert.ok(listed.items.every((p) => p.kind === 'pty'))
    const c = sb.pty.connect(h.id)
    assert.equal(c.kind, 'pty')
    assert.equal(sb.pty.connect(h.toJSON()).id, h.id)
    await sb.pty.delete(h.toJSON())
    await assert.rejects(h.get(), NotFoundError)
    const other = await sb.pty.start('sleep 30')
    await sb.pty.delete(other.id)
    await assert.rejects(other.get(), NotFoundError)
  })

  test('attach to an exec process is refused', async () => {
    const h = await sb.process.start('sleep 30')
    await assert.rejects(h.attach(), UnsupportedOperationError)
    await h.delete()
  })

  test('an attach that fails ends the PTY process it started', async () => {
    // A WebSocket whose handshake is refused, as behind a proxy that does not pass upgrades.
    class Refused extends WS {
      constructor(url: string, init: { headers: Record<string, string> }) {
        super(url.replace(/\/attach$/, '/attach-refused'), init)
      }
    }
    const s = d.sandbox({ WebSocket: Refused as never })
    const marker = `sleep 100 # attach-refused-${Date.now()}`
    await assert.rejects(s.pty.attach(marker))
    const left = (await sb.process.list({ kind: 'pty' })).items.filter((p) => p.shellCommand === marker)
    assert.deepEqual(left.map((p) => p.rawState), [], 'the PTY it started is gone')
  })

  test('a proxy that answers the upgrade 502 rejects the attach with UnexpectedResponseError 502', async () => {
    // A proxy that passes every request to the daemon but answers an
    // upgrade with its own 502 page, as one that does not pass WebSockets.
    const sockets = new Set<Socket>()
    const proxy: Server = createServer((req, res) => {
      const target = new URL(d.url)
      const up = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (a) => {
        res.writeHead(a.statusCode ?? 502, a.headers)
        a.pipe(res)
      })
      up.on('error', () => res.destroy())
      req.pipe(up)
    })
    proxy.on('connection', (c: Socket) => {
      sockets.add(c)
      c.on('close', () => sockets.delete(c))
    })
    proxy.on('upgrade', (_req, socket: Socket) => {
      const page = '<html><body><h1>502 Bad Gateway</h1></body></html>'
      socket.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: ${page.length}\r\nconnection: close\r\n\r\n${page}`)
    })
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r))
    try {
      const a = proxy.address()
      const s = d.sandbox({ url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`, WebSocket: WS as never })
      const refused = (e: unknown): boolean => {
        assert.ok(e instanceof UnexpectedResponseError && e instanceof ConchError, String(e))
        assert.deepEqual([e.code, e.status], ['unexpected_response', 502])
        return true
      }
      const marker = `sleep 100 # attach-502-${Date.now()}`
      await within(assert.rejects(s.pty.attach(marker), refused), 20_000, 'pty.attach')
      const left = (await sb.process.list({ kind: 'pty' })).items.filter((p) => p.shellCommand === marker)
      assert.deepEqual(left.map((p) => p.rawState), [], 'the PTY it started is gone')
      const h = await sb.pty.start('sleep 100')
      try {
        await within(assert.rejects(s.pty.connect(h.id).attach(), refused), 20_000, 'attach')
      } finally {
        await h.delete()
      }
    } finally {
      for (const c of sockets) c.destroy()
      await new Promise<void>((r) => proxy.close(() => r()))
    }
  })

  test('attach goes through the WebSocket the transport was given', async () => {
    const urls: string[] = []
    const Counting = class extends WS {
      constructor(url: string, init: { headers: Record<string, string> }) {
        urls.push(url)
        super(url, init)
      }
    }
    const s = d.sandbox({ WebSocket: Counting })
    const { handle, connection } = await s.pty.attach('echo via-injected')
    assert.match(await readAll(connection.readable[Symbol.asyncIterator]()), /via-injected/)
    assert.deepEqual(urls, [`${d.url.replace('http', 'ws')}/v1/processes/${handle.id}/attach`])
  })
})

/** Reads it to its end: the bytes it got and their digest. */
async function drainBytes(it: AsyncIterator<Uint8Array>): Promise<{ got: number; digest: string }> {
  const h = createHash('sha256')
  let got = 0
  for (;;) {
    const { value, done } = await it.next()
    if (done) return { got, digest: h.digest('hex') }
    h.update(value)
    got += value.length
  }
}

describe('PtyDuplex and a fast writer', () => {
  let fd: Daemon
  let fsb: Sandbox
  before(async () => {
    fd = await startDaemon(['--log-retention', '1M'])
    fsb = fd.sandbox()
  })
  after(async () => fd?.stop())

  const total = 24 << 20
  const writer = `stty raw -echo; printf R; read go; head -c ${total} /dev/urandom`

  test('a readable nobody reads stops reading the socket, and its reader is told how many bytes it missed', async () => {
    const { handle, connection: slow } = await fsb.pty.attach(writer)
    const it = slow.readable[Symbol.asyncIterator]()
    await readUntil(it, 'R')
    const gaps: number[] = []
    slow.on('gap', (gap) => gaps.push(gap.bytes))
    const fast = await handle.attach()
    const fastRead = drainBytes(fast.readable[Symbol.asyncIterator]())
    fast.write('\n')
    let most = 0
    const sampler = setInterval(() => (most = Math.max(most, slow.queuedBytes)), 5)
    const f = await fastRead
    clearInterval(sampler)
    assert.equal(f.got, total + 1, 'the reader that kept up got every byte')
    assert.ok(most <= 2 << 20, `the unread readable held ${most} bytes`)
    const s = await drainBytes(it)
    assert.ok(gaps.length > 0, 'no gap was reported')
    assert.equal(1 + s.got + gaps.reduce((a, b) => a + b, 0), total + 1, 'bytes read and missed')
    assert.equal(slow.missedBytes, gaps.reduce((a, b) => a + b, 0))
  })

  test('close() of a readable left unread ends its socket with the close handshake, at once', async () => {
    // A readable that holds its high water has paused the socket; close()
    // resumes it for the handshake, and the output that still comes must
    // not pause it again: the daemon's close frame waits behind that
    // output, and ws would end the socket 30 s later (1006), holding the
    // process open meanwhile.
    const kept = keptSocket()
    const { handle, connection } = await fd.sandbox({ WebSocket: kept.WebSocket }).pty.attach('yes')
    try {
      const closed = new Promise<number>((resolve) => kept.socket()!.on('close', (code) => resolve(code)))
      await within((async () => {
        while (connection.queuedBytes < 1 << 20) await new Promise((r) => setTimeout(r, 20))
      })(), 30_000, 'the unread readable reaching its high water')
      connection.close()
      assert.equal(await within(closed, 15_000, 'the socket closing after close()'), 1000)
    } finally {
      await handle.delete()
    }
  })

  test('over a WebSocket that cannot pause, the queue is bounded and a gap without a listener is an error', async () => {
    const NoPause = class extends WS {
      constructor(url: string, init: { headers: Record<string, string> }) {
        super(url, init)
        Object.defineProperty(this, 'pause', { value: undefined })
      }
    }
    const { handle, connection } = await fd.sandbox({ WebSocket: NoPause }).pty.attach(writer)
    const it = connection.readable[Symbol.asyncIterator]()
    await readUntil(it, 'R')
    let most = 0
    const sampler = setInterval(() => (most = Math.max(most, connection.queuedBytes)), 5)
    connection.write('\n')
    await handle.wait()
    let got = 0
    const err = await (async () => {
      try {
        for (;;) {
          const { value, done } = await it.next()
          if (done) return undefined
          got += value.length
        }
      } catch (e) {
        return e
      }
    })()
    clearInterval(sampler)
    assert.ok(err instanceof PtyGapError, `reading ended with ${String(err)}, not a PtyGapError`)
    assert.ok(err.bytes > 0)
    assert.ok(most <= 17 << 20, `the readable held ${most} bytes`)
    // Iterating again goes on after the gap.
    let missed = err.bytes
    for (let ended = false; !ended;) {
      try {
        for await (const chunk of connection.readable) got += chunk.length
        ended = true
      } catch (e) {
        assert.ok(e instanceof PtyGapError, String(e))
        missed += e.bytes
      }
    }
    assert.equal(1 + got + missed, total + 1, 'bytes read and missed')
    assert.equal(connection.missedBytes, missed)
  })
})

describe('PtyDuplex and a program that reads no input', () => {
  // While the program leaves its input unread the daemon reads no more of
  // the socket: what a writer writes then stays on this side. write() holds
  // it (it returns void and cannot wait) up to a bound; drain() is how a
  // writer waits. The terminal is raw: in its default mode it throws away
  // a line past 4095 bytes, and so takes input nobody reads without end.
  const reader = 'stty raw -echo; sleep 600'
  const MiB = 1 << 20
  const chunk = new Uint8Array(MiB).fill(0x61)

  test('a writer that awaits drain() after each write holds about 1 MiB unsent at most, and its drain rejects when the connection breaks', async () => {
    const kept = keptSocket()
    const { handle, connection } = await d.sandbox({ WebSocket: kept.WebSocket }).pty.attach(reader)
    try {
      let written = 0
      let most = 0
      let waiting = false
      const sampler = setInterval(() => (most = Math.max(most, connection.bufferedBytes)), 5)
      const writer = (async () => {
        for (let i = 0; i < 200; i++) {
          connection.write(chunk)
          written += chunk.length
          most = Math.max(most, connection.bufferedBytes)
          waiting = true
          await connection.drain()
          waiting = false
        }
      })()
      let over = false
      const ended = writer.then(() => undefined, (e: unknown) => e).finally(() => (over = true))
      // The daemon and the kernel take some MiB before the writer stops;
      // then give it time to write on if drain() let it.
      await within((async () => {
        while (!(waiting && connection.bufferedBytes >= MiB)) {
          if (over) break // drain() let it write all, or it failed: the assertions below say which
          await new Promise((r) => setTimeout(r, 20))
        }
      })(), 30_000, 'the writer waiting on drain()')
      await new Promise((r) => setTimeout(r, 1000))
      clearInterval(sampler)
      if (over) assert.fail(`the writer ended with ${String(await ended)} after ${written} bytes, to a program that reads none`)
      assert.ok(waiting, 'the writer is not waiting on drain()')
      assert.ok(most <= 2 * MiB + 4096, `the duplex held ${most} bytes unsent`)
      // (A process that ends does not do: the daemon then reads the input
      // still coming, and drops it.)
      kept.socket()!.terminate() // the connection breaks, as a network does
      const err = await within(ended, 30_000, 'the drain() pending as the connection broke')
      assert.ok(err instanceof Error && /closed with \d+ bytes of input not sent/.test(err.message), `drain() ended with ${String(err)}`)
      assert.equal(connection.bufferedBytes, 0)
      await assert.rejects(connection.drain(), /not sent/, 'a drain() after the close rejects as well')
    } finally {
      await handle.delete().catch(() => {})
    }
  })

  test('close() with input left unsent, which the program reads none of, ends its socket once that input stands still', async () => {
    // The closing handshake waits behind the unsent input, which the daemon
    // takes no more of: ws alone would end the socket 30 s later.
    const kept = keptSocket()
    const { handle, connection } = await d.sandbox({ WebSocket: kept.WebSocket }).pty.attach(reader)
    try {
      const closed = new Promise<number>((resolve) => kept.socket()!.on('close', (code) => resolve(code)))
      for (let i = 0; i < 12; i++) connection.write(chunk)
      // What the daemon and the kernel take, they take at once.
      await new Promise((r) => setTimeout(r, 1000))
      assert.ok(connection.bufferedBytes >= MiB, `only ${connection.bufferedBytes} bytes left unsent`)
      const drained = connection.drain().then(() => undefined, (e: unknown) => e)
      connection.close()
      assert.equal(await within(closed, 15_000, 'the socket closing after close()'), 1006)
      const err = await within(drained, 2000, 'the drain() pending as the socket closed')
      assert.ok(err instanceof Error && /closed with \d+ bytes of input not sent/.test(err.message), `drain() ended with ${String(err)}`)
    } finally {
      await handle.delete().catch(() => {})
    }
  })

  test('close() with its input all sent, which the program reads none of, ends its socket once nothing moves', async () => {
    // A little more input than the daemon takes: the rest waits unread in
    // the daemon's socket, the close frame behind it, and nothing is left
    // unsent here. ws alone would end the socket 30 s later.
    const kept = keptSocket()
    const { handle, connection } = await d.sandbox({ WebSocket: kept.WebSocket }).pty.attach(reader)
    try {
      const closed = new Promise<number>((resolve) => kept.socket()!.on('close', (code) => resolve(code)))
      const piece = new Uint8Array(32 << 10).fill(0x61)
      for (let i = 0; i < 37; i++) connection.write(piece) // 1 MiB and 160 KiB
      await within(connection.drain(), 10_000, 'the input all leaving this host')
      assert.equal(connection.bufferedBytes, 0)
      connection.close()
      assert.equal(await within(closed, 15_000, 'the socket closing after close()'), 1006)
      assert.equal((await handle.get()).state, 'running')
    } finally {
      await handle.delete().catch(() => {})
    }
  })

  test('a writer that does not await drain() is refused past 16 MiB unsent, and nothing of the refused write is sent', async () => {
    const { handle, connection } = await sb.pty.attach(reader)
    try {
      // One write over the bound is refused whole, whatever is unsent.
      assert.throws(() => connection.write(new Uint8Array(16 * MiB + 1)), PtyInputFullError)
      assert.equal(connection.bufferedBytes, 0)
      let written = 0
      let err: unknown
      for (let i = 0; i < 200; i++) {
        try {
          connection.write(chunk)
        } catch (e) {
          err = e
          break
        }
        written += chunk.length
      }
      assert.ok(err instanceof PtyInputFullError, `200 writes of 1 MiB ended with ${String(err)}`)
      assert.ok(written < 200 * MiB)
      assert.equal(err.bytes, MiB)
      assert.ok(err.bufferedBytes <= 16 * MiB && err.bufferedBytes + MiB > 16 * MiB, `refused with ${err.bufferedBytes} unsent`)
      assert.match(err.message, /await drain\(\)/)
      const unsent = connection.bufferedBytes
      assert.ok(unsent <= 16 * MiB, `the duplex holds ${unsent} bytes unsent`)
      assert.throws(() => connection.write(chunk), PtyInputFullError)
      assert.ok(connection.bufferedBytes <= unsent, 'a refused write was queued')
      connection.write('') // nothing more is always taken
    } finally {
      await handle.delete()
    }
  })

  test('drain() after a keystroke resolves at once, and a writer that awaits it gets every byte to a program that reads', async () => {
    const total = 8 * MiB
    const { handle, connection } = await sb.pty.attach(`stty raw -echo; printf R; head -c ${total} | sha256sum; printf E`)
    const it = connection.readable[Symbol.asyncIterator]()
    await readUntil(it, 'R')
    connection.write('a')
    let resolved = false
    void connection.drain().then(() => (resolved = true))
    await Promise.resolve()
    assert.ok(resolved, 'drain() waited with a byte unsent')
    const h = createHash('sha256').update('a')
    const data = new Uint8Array(MiB)
    await within((async () => {
      for (let sent = 1; sent < total;) {
        const n = Math.min(data.length, total - sent)
        for (let i = 0; i < n; i++) data[i] = 0x61 + ((sent + i) % 26)
        const piece = data.subarray(0, n)
        h.update(piece)
        connection.write(piece)
        sent += n
        await connection.drain()
      }
    })(), 60_000, 'writing 8 MiB with drain()')
    const out = await within(readUntil(it, 'E'), 60_000, 'the digest')
    assert.match(out, new RegExp(h.digest('hex')))
    assert.deepEqual((await handle.wait()).exitCode, 0)
  })
})

describe('an attachment the daemon goes quiet on', () => {
  // A server of the test's own that takes the attach handshake and then
  // does what the test says: nothing more, as a daemon frozen with SIGSTOP,
  // or pings only, as a live daemon with no output to send.
  let server: Server
  let wss: WebSocketServer
  let url: string
  let serve: (ws: WS) => void = () => {}

  before(async () => {
    server = createServer((_req, res) => res.writeHead(404).end())
    wss = new WebSocketServer({ server })
    wss.on('connection', (ws) => serve(ws))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const a = server.address()
    url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`
  })
  after(async () => {
    for (const ws of wss.clients) ws.terminate()
    await new Promise<void>((r) => wss.close(() => r()))
    await new Promise<void>((r) => server.close(() => r()))
  })

  test('nothing, not even a ping, for streamIdleTimeout: readable throws DeadlineExceededError', async () => {
    serve = (ws) => ws.send(new TextEncoder().encode('hi'))
    const c = await new Sandbox({ url, token: 't', streamIdleTimeout: 300 }).process.connect('p').attach()
    const it = c.readable[Symbol.asyncIterator]()
    assert.equal(await within(readUntil(it, 'hi'), 10_000, 'the first bytes'), 'hi')
    const err = await within(it.next().then(() => undefined, (e: unknown) => e), 20_000, 'the readable\'s end')
    assert.ok(err instanceof DeadlineExceededError, String(err))
    assert.match(err.message, /attach to p .*nothing from the daemon, not even a ping, within 300 ms/)
  })

  test('pings keep a quiet attachment, however long no output comes', async () => {
    let pinger: NodeJS.Timeout | undefined
    let conn: WS | undefined
    serve = (ws) => {
      conn = ws
      pinger = setInterval(() => ws.ping(), 100)
    }
    try {
      const c = await new Sandbox({ url, token: 't', streamIdleTimeout: 500 }).process.connect('p').attach()
      const it = c.readable[Symbol.asyncIterator]()
      const read = it.next()
      const settled = await Promise.race([read.then(() => 'settled', () => 'settled'), new Promise((r) => setTimeout(() => r('pending'), 2000))])
      assert.equal(settled, 'pending', 'the attachment ended while pings came')
      conn!.send(new TextEncoder().encode('bye'))
      conn!.close(1000)
      const r = await within(read, 10_000, 'the read')
      assert.equal(new TextDecoder().decode(r.value), 'bye')
      assert.deepEqual(await within(it.next(), 10_000, 'the end'), { done: true, value: undefined })
    } finally {
      clearInterval(pinger)
    }
  })
})
