// A daemon that answers what no conch daemon does: bodies without end or
// sent a byte at a time, JSON of other shapes or nested without end, lying
// lengths, log streams with endless lines, pages that never move on, a huge
// attach message. Every call ends within its time bound, holds a bounded
// amount, and fails with one of the SDK's errors.

import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { inspect } from 'node:util'

import { WebSocketServer } from 'ws'

import {
  DeadlineExceededError, type RunResult, Sandbox, type SandboxOptions, type StreamLogEvent, UnexpectedResponseError,
} from '@conchsh/sdk'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

let server: Server
let url: string
let handler: Handler = (_req, res) => res.end()
const sockets = new Set<Socket>()
const timers = new Set<ReturnType<typeof setInterval>>()

before(async () => {
  server = createServer((req, res) => handler(req, res))
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const a = server.address() as { port: number }
  url = `http://127.0.0.1:${a.port}`
})
after(async () => {
  for (const t of timers) clearInterval(t)
  for (const s of sockets) s.destroy()
  await new Promise((r) => server.close(r))
})

function sandbox(o: Partial<SandboxOptions> = {}): Sandbox {
  return new Sandbox({ url, token: 't', requestTimeout: 15_000, ...o })
}

/** Every request answered by answer(path, req, res). */
function serve(answer: Handler): void {
  handler = (req, res) => {
    req.resume()
    answer(req, res)
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

/** A body that starts with head and goes on with blanks for ever (or until limit bytes), never ending. */
function endless(res: ServerResponse, status: number, head: string, limit = Infinity): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.write(head)
  const chunk = Buffer.alloc(1 << 20, 0x20)
  let sent = 0
  const pump = (): void => {
    while (sent < limit && !res.destroyed) {
      sent += chunk.length
      if (!res.write(chunk)) {
        res.once('drain', pump)
        return
      }
    }
  }
  pump()
}

/** An interval this file ends in its after(), and at its socket's close. */
function every(ms: number, s: Socket, f: () => void): void {
  const t = setInterval(() => {
    if (s.destroyed) clearInterval(t)
    else f()
  }, ms)
  timers.add(t)
  s.on('close', () => clearInterval(t))
}

const sleep = (ms: number): Promise<'late'> => new Promise((r) => setTimeout(() => r('late'), ms).unref())

/** Requires p to reject within ms with an error of cls, and returns it. */
async function rejects<T extends Error>(p: Promise<unknown>, cls: new (...a: never[]) => T, ms = 60_000): Promise<T> {
  const got = await Promise.race([p.then((v) => ({ v }), (e: unknown) => ({ e })), sleep(ms)])
  assert.notEqual(got, 'late', `still waiting after ${ms} ms`)
  const r = got as { v?: unknown; e?: unknown }
  assert.ok('e' in r, `resolved: ${inspect(r.v, { depth: 1 }).slice(0, 300)}`)
  assert.ok(r.e instanceof cls, `rejected with ${String(r.e).slice(0, 300)}, not a ${cls.name}`)
  return r.e as T
}

/** Collects a stream's events within ms. */
async function events(it: AsyncIterable<StreamLogEvent>, ms = 60_000): Promise<StreamLogEvent[]> {
  const out: StreamLogEvent[] = []
  const all = (async () => {
    for await (const ev of it) out.push(ev)
  })()
  assert.notEqual(await Promise.race([all, sleep(ms)]), 'late', `the stream still runs after ${ms} ms: ${inspect(out).slice(0, 300)}`)
  return out
}

/** JSON nested n levels deep. */
function deep(n: number): string {
  return '['.repeat(n) + ']'.repeat(n)
}

describe('a body larger than any answer', () => {
  test('list, get, wait and run reject with UnexpectedResponseError rather than read on', async () => {
    serve((_req, res) => endless(res, 200, '{"items":[', 300 << 20))
    const sb = sandbox()
    await rejects(sb.process.list(), UnexpectedResponseError)
    serve((_req, res) => endless(res, 200, '{"id":"p","reason":"exited","exitCode":0', 300 << 20))
    await rejects(sb.process.connect('p').wait({ timeout: 1000 }), UnexpectedResponseError)
    await rejects(sb.exec('true', { timeout: 1000 }), UnexpectedResponseError)
  })

  test('an error status with an endless body rejects with UnexpectedResponseError', async () => {
    serve((_req, res) => endless(res, 500, '{"error":{"code":"internal","message":"', 300 << 20))
    await rejects(sandbox().process.get('p'), UnexpectedResponseError)
  })

  test('a Content-Length over the bound is refused before its body is read', async () => {
    serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2 ** 40) })
      res.write('{"id":"p"')
    })
    await rejects(sandbox().process.get('p'), UnexpectedResponseError, 10_000)
  })
})

describe('an answer sent slowly', () => {
  test('a body trickled a byte every 50 ms past requestTimeout rejects with DeadlineExceededError', async () => {
    serve((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      every(50, req.socket, () => res.write(' '))
    })
    await rejects(sandbox({ requestTimeout: 500 }).process.get('p'), DeadlineExceededError, 10_000)
  })

  test('headers trickled a byte every 50 ms past requestTimeout reject with DeadlineExceededError', async () => {
    handler = (req) => {
      const s = req.socket
      const head = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-slow: '
      let i = 0
      every(50, s, () => s.write(i < head.length ? head[i++]! : 'a'))
    }
    await rejects(sandbox({ requestTimeout: 500 }).process.get('p'), DeadlineExceededError, 10_000)
  })

  test('a Content-Length longer than the body sent, the connection held, rejects with DeadlineExceededError', async () => {
    serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' })
      res.write('{"id":"p"}')
    })
    await rejects(sandbox({ requestTimeout: 500 }).process.get('p'), DeadlineExceededError, 10_000)
  })

  test('a Content-Length shorter than the body sent is JSON cut short: UnexpectedResponseError', async () => {
    serve((req, _res) => {
      req.socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\n{"id":"p","kind":"exec"}')
    })
    await rejects(sandbox().process.get('p'), UnexpectedResponseError, 10_000)
  })
})

describe('JSON of another shape', () => {
  test('nested 100 000 levels deep, where an object goes or inside one', async () => {
    const sb = sandbox()
    serve((_req, res) => json(res, 200, deep(100_000)))
    await rejects(sb.process.get('p'), UnexpectedResponseError)
    await rejects(sb.process.list(), UnexpectedResponseError)
    serve((_req, res) => json(res, 200, `{"items":[${deep(100_000)}]}`))
    await rejects(sb.process.list(), UnexpectedResponseError)
    serve((_req, res) => json(res, 200, `{"id":"p","kind":${deep(100_000)},"state":${deep(100_000)}}`))
    const p = await sb.process.get('p')
    assert.equal(p.kind, 'unknown')
    assert.equal(typeof p.rawKind, 'string')
  })

  test('a list, a string, null and huge numbers where the API has other types', async () => {
    const sb = sandbox()
    for (const body of ['[]', '"p"', 'null', '{"id":null}', '{"id":["p"]}', '{"id":1e999}']) {
      serve((_req, res) => json(res, 200, body))
      await rejects(sb.process.get('p'), UnexpectedResponseError)
    }
    serve((_req, res) => json(res, 200, '{"items":{"id":"p"}}'))
    await rejects(sb.process.list(), UnexpectedResponseError)
    serve((_req, res) => json(res, 200, '{"items":[null]}'))
    await rejects(sb.process.list(), UnexpectedResponseError)
  })

  test("a run's answer without its process id, or with one of another type", async () => {
    const sb = sandbox()
    for (const body of ['{"reason":"exited","exitCode":0}', '{"processId":null,"reason":"exited","exitCode":0}', '{"processId":{"a":1},"reason":"exited","exitCode":0}']) {
      serve((_req, res) => json(res, 200, body))
      await rejects(sb.exec('true'), UnexpectedResponseError)
    }
  })

  test("frames of another shape are not handed on as LogFrames", async () => {
    const sb = sandbox()
    const frames = '[null,5,"x",[1],{"cursor":7,"channel":null,"data":{"a":1},"encoding":3},{"cursor":"2","channel":"stdout","data":"ok"}]'
    serve((_req, res) => json(res, 200, `{"processId":"p","reason":"exited","exitCode":"0","output":"ok","stdout":"ok","stderr":"","logs":${frames}}`))
    const r = await sb.exec('true')
    for (const f of r.logs) {
      assert.equal(typeof f, 'object', inspect(r.logs))
      assert.equal(typeof f.cursor, 'string')
      assert.equal(typeof f.channel, 'string')
      assert.equal(typeof f.data, 'string')
    }
    serve((_req, res) => json(res, 200, `{"items":${frames}}`))
    const page = await sb.process.connect('p').logs()
    for (const f of page.items) assert.equal(typeof f.data, 'string', inspect(page.items))
  })

  test('invalid UTF-8 is replaced, not an error', async () => {
    serve((_req, res) => {
      const body = Buffer.concat([Buffer.from('{"id":"p","kind":"exec","note":"'), Buffer.from([0xff, 0xc3]), Buffer.from('"}')])
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
      res.end(body)
    })
    const p = await sandbox().process.get('p')
    assert.equal(p.id, 'p')
  })
})

describe('paging that does not move on', () => {
  test("a run's omitted output paged from a logs page whose next repeats for ever", async () => {
    serve((req, res) => {
      if (req.url!.startsWith('/v1/processes/run')) {
        json(res, 200, {
          processId: 'p', reason: 'exited', exitCode: 0, output: 'a', stdout: 'a', stderr: '',
          logs: [{ cursor: '1', channel: 'stdout', data: 'a' }], omittedBytes: 10, omittedAfter: '1', next: '9',
        })
        return
      }
      json(res, 200, { items: [{ cursor: '2', channel: 'stdout', data: 'b' }], next: '1' })
    })
    await rejects(sandbox().exec('true'), UnexpectedResponseError, 20_000)
  })

  test('a run past its wait window, whose logs pages repeat their cursor for ever', async () => {
    serve((req, res) => {
      if (req.url!.startsWith('/v1/processes/run')) {
        json(res, 202, { processId: 'p', id: 'p', state: 'running', next: '0' })
        return
      }
      if (req.url!.includes('/interact')) {
        // It tells bytes enough that the pages repeat before they pass them.
        json(res, 200, { processId: 'p', reason: 'exited', exitCode: 0, omittedBytes: 100, omittedAfter: '0', next: '100' })
        return
      }
      json(res, 200, { items: [{ cursor: '', channel: 'stdout', data: 'b' }] })
    })
    const e = await rejects(sandbox().exec('true'), UnexpectedResponseError, 20_000)
    assert.match(e.message, /read already/)
  })
})

describe('paging without end', () => {
  test("a run's omitted output paged from logs pages that each name a new cursor, for ever", async () => {
    for (const data of ['b', '']) {
      let at = 100
      let pages = 0
      serve((req, res) => {
        if (req.url!.startsWith('/v1/processes/run')) {
          json(res, 200, {
            processId: 'p', reason: 'exited', exitCode: 0, output: 'a', stdout: 'a', stderr: '',
            logs: [{ cursor: '1', channel: 'stdout', data: 'a' }, { cursor: '9', channel: 'stdout', data: 'z' }],
            omittedBytes: 10, omittedAfter: '1', next: '9',
          })
          return
        }
        pages++
        at++
        json(res, 200, { items: [{ cursor: String(at), channel: 'stdout', data }], next: String(at) })
      })
      const e = await rejects(sandbox().exec('true'), UnexpectedResponseError, 20_000)
      assert.match(e.message, /past the 10 bytes/)
      assert.ok(pages <= 12, `${pages} pages`) // the 11 bytes up to next, then one
    }
  })

  // A run past its wait window reads its output from the logs once it is
  // back: the answers told 6 bytes (2 held and 3 left out by the run's, 1
  // by the interact's), and pages past them are not the daemon's for a
  // process that ended; one still running (waiting for input) wrote on
  // after its last answer, and its result stops there.
  for (const ended of [true, false]) {
    test(`a run's logs read from the start, from pages that each name a new cursor, for ever (${ended ? 'ended' : 'running'})`, async () => {
      for (const data of ['b', '']) {
        let at = 100
        let pages = 0
        serve((req, res) => {
          if (req.url!.startsWith('/v1/processes/run')) {
            json(res, 202, {
              processId: 'p', id: 'p', state: 'running', next: '1', omittedBytes: 3, omittedAfter: '0',
              logs: [{ cursor: '1', channel: 'stdout', data: 'ab' }],
            })
            return
          }
          if (req.url!.includes('/interact')) {
            const logs = [{ cursor: '2', channel: 'stdout', data: 'c' }]
            if (ended) json(res, 200, { processId: 'p', reason: 'exited', exitCode: 0, logs, next: '2' })
            else json(res, 202, { processId: 'p', id: 'p', state: 'running', waitingForInput: true, logs, next: '2' })
            return
          }
          pages++
          at++
          json(res, 200, { items: [{ cursor: String(at), channel: 'stdout', data }], next: String(at) })
        })
        const run = sandbox().exec('true')
        if (ended) {
          const e = await rejects(run, UnexpectedResponseError, 20_000)
          assert.match(e.message, /past the 6 bytes/)
        } else {
          const r = await Promise.race([run, sleep(20_000)])
          assert.ok(r !== 'late', 'still paging after 20 s')
          assert.equal((r as RunResult).output, data.repeat(6))
        }
        assert.ok(pages <= 7, `${pages} pages`) // the 6 bytes, then one
      }
    })
  }
})

describe('a wait answered 202 at once', () => {
  test('is not asked again before its window passed', async () => {
    let waits = 0
    serve((_req, res) => {
      waits++
      json(res, 202, { id: 'p', state: 'running' })
    })
    const r = await sandbox().process.connect('p').wait({ timeout: 1000 })
    assert.equal(r.rawReason, 'wait_timeout')
    // One window of a second: a wait or two, not the thousands asked at once.
    assert.ok(waits < 10, `${waits} waits`)
  })

  test('a ready answered 202 at once is not asked again before its window passed', async () => {
    let readies = 0
    serve((_req, res) => {
      readies++
      json(res, 202, { id: 'p', state: 'running' })
    })
    const r = await sandbox().process.connect('p').ready({ port: 80, timeout: 1000 })
    assert.equal(r.ready, false)
    assert.ok(readies < 10, `${readies} readies`)
  })

  test("a run's interacts answered 202 at once are not asked again before their window passed", async () => {
    let interacts = 0
    serve((req, res) => {
      if (req.url!.includes('/interact')) interacts++
      if (req.url!.includes('/logs')) return json(res, 200, { items: [] })
      json(res, 202, { processId: 'p', id: 'p', state: 'running', next: '0' })
    })
    const r = await sandbox().exec('true', { timeout: 1000 })
    assert.equal(r.rawReason, 'wait_timeout')
    // One window of a second: an interact or two, not the thousands asked at once.
    assert.ok(interacts < 10, `${interacts} interacts`)
  })
})

describe('a hostile log stream', () => {
  const stream = (write: (res: ServerResponse) => void): void =>
    serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      write(res)
    })

  test('an endless line without a newline ends the stream with UnexpectedResponseError', async () => {
    stream((res) => {
      res.write('event: log\ndata: ')
      const chunk = Buffer.alloc(1 << 20, 0x61)
      let sent = 0
      const pump = (): void => {
        while (sent < 64 << 20 && !res.destroyed) {
          sent += chunk.length
          if (!res.write(chunk)) return void res.once('drain', pump)
        }
      }
      pump()
    })
    const evs = await events(sandbox({ streamIdleTimeout: 3000 }).process.connect('p').streamLogs())
    const last = evs.at(-1)
    assert.equal(last?.type, 'error', inspect(evs).slice(0, 300))
    assert.ok(last.type === 'error' && last.error instanceof UnexpectedResponseError, String(last.type === 'error' && last.error))
  })

  test('a 100 MB data line ends the stream with UnexpectedResponseError', async () => {
    stream((res) => {
      res.write('event: log\ndata: {"cursor":"1","channel":"stdout","data":"')
      res.write(Buffer.alloc(100_000_000, 0x61))
      res.write('"}\n\n')
    })
    const evs = await events(sandbox({ streamIdleTimeout: 3000 }).process.connect('p').streamLogs())
    const last = evs.at(-1)
    assert.ok(last?.type === 'error' && last.error instanceof UnexpectedResponseError, inspect(evs, { depth: 1 }).slice(0, 300))
  })

  test('a log event without a cursor does not move a resume back to the start', async () => {
    const asked: Array<string | undefined> = []
    serve((req, res) => {
      asked.push(req.headers['last-event-id'] as string | undefined)
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      if (asked.length === 1) {
        res.write('event: log\nid: 5\ndata: {"cursor":"5","channel":"stdout","data":"a"}\n\n')
        res.write('event: log\ndata: {"cursor":"","channel":"stdout","data":"b"}\n\n')
        res.end() // cut before eof: resumed
        return
      }
      res.write('event: eof\nid: 5\ndata: {}\n\n')
      res.end()
    })
    const evs = await events(sandbox().process.connect('p').streamLogs())
    assert.equal(evs.at(-1)?.type, 'eof', inspect(evs, { depth: 2 }).slice(0, 500))
    assert.deepEqual(asked, [undefined, '5'])
  })

  test('events with fields of the wrong type', async () => {
    stream((res) => {
      res.write(`event: warning\ndata: {"message":${deep(100_000)}}\n\n`)
      res.write('event: log\ndata: {"cursor":5,"channel":["x"],"data":null}\n\n')
      res.write('event: log\nid: 7\ndata: {"cursor":"7","channel":"stdout","data":"ok"}\n\n')
      res.write(`event: log\ndata: ${deep(100_000)}\n\n`)
      res.write('event: state\ndata: {"reason":"exited","exitCode":"0"}\n\n')
      res.write('event: eof\ndata: {}\n\n')
      res.end()
    })
    const evs = await events(sandbox().process.connect('p').streamLogs())
    assert.ok(evs.every((e) => e.type !== 'error'), inspect(evs, { depth: 2 }).slice(0, 500))
    for (const e of evs) {
      if (e.type === 'log') {
        assert.equal(typeof e.cursor, 'string')
        assert.equal(typeof e.frame.data, 'string')
        assert.equal(typeof e.frame.channel, 'string')
      }
      if (e.type === 'warning') assert.equal(typeof e.message, 'string')
    }
    assert.equal(evs.at(-1)?.type, 'eof')
  })
})

describe('a hostile attachment', () => {
  test('a message larger than any the daemon sends ends the readable with an error, not one huge chunk', async () => {
    const wss = new WebSocketServer({ noServer: true })
    handler = () => {}
    const onUpgrade = (req: IncomingMessage, s: Socket, head: Buffer): void => {
      wss.handleUpgrade(req, s, head, (ws) => ws.send(Buffer.alloc(8 << 20, 0x61)))
    }
    server.on('upgrade', onUpgrade)
    try {
      const conn = await sandbox().process.connect('p').attach()
      const got: number[] = []
      const read = (async () => {
        for await (const b of conn.readable) got.push(b.length)
      })()
      const r = await Promise.race([read.then(() => 'ended', (e: unknown) => e), sleep(20_000)])
      conn.close()
      assert.notEqual(r, 'late')
      assert.ok(got.every((n) => n <= 1 << 20), `read chunks of ${got.join(', ')} bytes`)
      assert.ok(r instanceof Error, `the readable ${String(r)}`)
    } finally {
      server.off('upgrade', onUpgrade)
      wss.close()
    }
  })
})
