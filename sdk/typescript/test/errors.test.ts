import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import {
  AlreadyExistsError, AuthenticationError, ConchError, InternalError, InvalidArgumentError, type LogFrame, NotFoundError,
  DrainingError, PayloadTooLargeError, PermissionDeniedError, ProcessHandle, ProcessService, PtyService,
  ResourceExhaustedError, Sandbox, StdinFullError, UnexpectedResponseError, UnsupportedOperationError,
} from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'

let d: Daemon
let sb: Sandbox

before(async () => {
  // Tight limits, so that each error of the API can be had from a real daemon.
  d = await startDaemon(['--body-limit', '64K', '--max-sessions', '1'])
  sb = d.sandbox()
})
after(async () => d?.stop())

/** Asserts that p rejects with cls, whose code and status are the API's. */
async function rejectsWith(p: Promise<unknown>, cls: new (...args: never[]) => ConchError, code: string, status: number): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof cls, `${String(err)} is a ${cls.name}`)
    assert.ok(err instanceof ConchError)
    assert.equal(err.code, code)
    assert.equal(err.status, status)
    assert.ok(err.message.length > 0)
    return true
  })
}

describe('errors from a real daemon', () => {
  test('InvalidArgumentError', async () => {
    await rejectsWith(sb.process.createSession({ shell: 'fish' }), InvalidArgumentError, 'invalid_argument', 400)
    await rejectsWith(sb.process.start('true', { cwd: 'relative' }), InvalidArgumentError, 'invalid_argument', 400)
  })

  test('AuthenticationError', async () => {
    await rejectsWith(d.sandbox({ token: 'wrong' }).process.list(), AuthenticationError, 'unauthenticated', 401)
  })

  test('PermissionDeniedError', async () => {
    const fromPage: typeof fetch = (input, init) =>
      fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), origin: 'http://evil.example' } })
    await rejectsWith(d.sandbox({ fetch: fromPage }).process.list(), PermissionDeniedError, 'permission_denied', 403)
  })

  test('NotFoundError', async () => {
    await rejectsWith(sb.process.get('no-such-process'), NotFoundError, 'not_found', 404)
    await rejectsWith(sb.process.connectSession('no-such-session').run('true'), NotFoundError, 'not_found', 404)
  })

  test('UnsupportedOperationError', async () => {
    const h = await sb.process.start('sleep 30')
    await rejectsWith(h.resize(80, 24), UnsupportedOperationError, 'unsupported_operation', 409)
    await h.delete()
  })

  test('PayloadTooLargeError', async () => {
    const h = await sb.process.start('cat >/dev/null', { stdin: 'open' })
    await rejectsWith(h.stdin(new Uint8Array(128 << 10)), PayloadTooLargeError, 'payload_too_large', 413)
    await h.delete()
  })

  test('StdinFullError, with the bytes the daemon queued (acceptedBytes)', async () => {
    const h = await sb.process.start('sleep 30', { stdin: 'open' })
    try {
      await h.stdin(new Uint8Array(40_000))
      // The input queue holds 1 MiB a process; the body limit here is 64K, so fill it in steps.
      let queued = 40_000
      let err: unknown
      for (let i = 0; i < 40 && err === undefined; i++) {
        try {
          await h.stdin(new Uint8Array(40_000))
          queued += 40_000
        } catch (e) {
          err = e
        }
      }
      assert.ok(err instanceof StdinFullError, String(err))
      assert.ok(err instanceof ConchError)
      assert.deepEqual([err.code, err.status], ['stdin_full', 409])
      // What the pipe took beside the queue (its buffer) is not counted: only a part fit.
      assert.ok(queued >= 1 << 20 && err.acceptedBytes >= 0 && err.acceptedBytes < 40_000, `${queued} ${err.acceptedBytes}`)
    } finally {
      await h.delete()
    }
  })

  test('DrainingError, with Retry-After, from a daemon that drains', async () => {
    const draining = await startDaemon()
    try {
      const s = draining.sandbox()
      const h = await s.process.start('sleep 30') // holds the drain open
      process.kill(draining.pid, 'SIGTERM')
      let err: unknown
      for (let i = 0; i < 50 && err === undefined; i++) {
        try {
          const r = await s.exec('true')
          assert.equal(r.reason, 'exited')
          await new Promise((r) => setTimeout(r, 50))
        } catch (e) {
          err = e
        }
      }
      assert.ok(err instanceof DrainingError, String(err))
      assert.deepEqual([err.code, err.status, err.retryAfter], ['draining', 503, 1])
      await h.kill({ signal: 'KILL' })
    } finally {
      await draining.stop()
    }
  })

  test('AlreadyExistsError names the running session that has a unique name', async () => {
    await using s = await sb.process.createSession({ name: 'only', uniqueName: true })
    await assert.rejects(sb.process.createSession({ name: 'only', uniqueName: true }), (err: unknown) => {
      assert.ok(err instanceof AlreadyExistsError, String(err))
      assert.deepEqual([err.code, err.status, err.sessionId], ['already_exists', 409, s.id])
      return true
    })
  })

  test('ResourceExhaustedError', async () => {
    await using _s = await sb.process.createSession()
    await rejectsWith(sb.process.createSession(), ResourceExhaustedError, 'resource_exhausted', 429)
  })

  test('a network failure rejects with the platform error', async () => {
    const gone = new Sandbox({ url: 'http://127.0.0.1:1', token: 'x' })
    await assert.rejects(gone.process.list(), (err: unknown) => err instanceof TypeError && !(err instanceof ConchError))
  })

  test('Sandbox.fromEnv finds the daemon by CONCH_URL and CONCH_TOKEN, else by its daemon.json', async () => {
    const saved = { ...process.env }
    try {
      process.env.CONCH_URL = d.url
      process.env.CONCH_TOKEN = d.token
      assert.equal((await Sandbox.fromEnv()).transport.url, d.url)
      await (await Sandbox.fromEnv()).process.list()
      // A token read into the variable with its line's end, as the
      // Python SDK takes it.
      process.env.CONCH_TOKEN = ` ${d.token}\n`
      await (await Sandbox.fromEnv()).process.list()
      delete process.env.CONCH_URL
      delete process.env.CONCH_TOKEN
      process.env.XDG_STATE_HOME = join(d.dir, 'state')
      const found = await Sandbox.fromEnv({ sandboxId: 'found' })
      assert.equal(found.sandboxId, 'found')
      assert.equal(found.transport.url, d.url)
      assert.equal((await found.exec('echo found')).stdout, 'found\n')
    } finally {
      process.env = saved
    }
  })
})

describe('Sandbox.fromEnv with CONCH_TOKEN alone', () => {
  test('reaches the daemon that took its token from CONCH_TOKEN, at the URL it recorded', async () => {
    const e = await startDaemon([], { tokenFromEnv: true })
    const saved = { ...process.env }
    try {
      delete process.env.CONCH_URL
      process.env.CONCH_TOKEN = e.token
      process.env.XDG_STATE_HOME = join(e.dir, 'state')
      const s = await Sandbox.fromEnv()
      assert.equal(s.transport.url, e.url)
      assert.equal((await s.exec('echo env')).stdout, 'env\n')
      // Without the token, discovery says where it must come from.
      delete process.env.CONCH_TOKEN
      await assert.rejects(Sandbox.fromEnv(), (err: Error) => {
        assert.ok(err.message.includes(e.url) && err.message.includes('CONCH_TOKEN'), err.message)
        return true
      })
    } finally {
      process.env = saved
      await e.stop()
    }
  })
})

describe('answers a daemon cannot be made to give', () => {
  let stub: Server
  let url: string
  let answer: { status: number; body: string; type?: string; location?: string }
  let route: ((path: string) => { status: number; body: string; type?: string }) | undefined
  const asked: string[] = []

  before(async () => {
    stub = createServer((req, res) => {
      asked.push(`${req.method ?? ''} ${req.url ?? ''}`)
      const a: { status: number; body: string; type?: string; location?: string } = route ? route(req.url ?? '') : answer
      res.writeHead(a.status, { 'content-type': a.type ?? 'application/json', ...(a.location ? { location: a.location } : {}) })
      res.end(a.body)
    })
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r))
    const a = stub.address()
    url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`
  })
  after(() => new Promise<void>((r) => stub.close(() => r())))

  test('InternalError, an unknown code, and a status without a body', async () => {
    const s = new Sandbox({ url, token: 't' })
    answer = { status: 500, body: '{"error":{"code":"internal","message":"a bug"}}' }
    await rejectsWith(s.process.get('x'), InternalError, 'internal', 500)
    answer = { status: 418, body: '{"error":{"code":"teapot","message":"short and stout"}}' }
    await rejectsWith(s.process.get('x'), ConchError, 'teapot', 418)
    // No body at all: named by its status, when the API uses that status.
    answer = { status: 404, body: '' }
    await rejectsWith(s.process.get('x'), NotFoundError, 'not_found', 404)
    answer = { status: 500, body: ' \n' }
    await rejectsWith(s.process.get('x'), InternalError, 'internal', 500)
    answer = { status: 502, body: '' }
    await rejectsWith(s.process.get('x'), UnexpectedResponseError, 'unexpected_response', 502)
    // 503, which the daemon answers while it drains, as the Python SDK
    // names it (UnavailableError there): it was UnexpectedResponseError.
    answer = { status: 503, body: '' }
    await rejectsWith(s.process.get('x'), DrainingError, 'draining', 503)
  })

  test('an error status whose body is not the API\'s error (a proxy\'s page, another server\'s text) is UnexpectedResponseError', async () => {
    const s = new Sandbox({ url, token: 't' })
    const page = `<html><head><title>502 Bad Gateway</title></head><body>${'<p>nginx</p>'.repeat(100)}</body></html>`
    for (const [status, body, type] of [
      [502, page, 'text/html'], [504, page.replace(/502 Bad/g, '504 Gateway'), 'text/html'],
      [404, 'not here', 'text/plain'], [500, 'Internal Server Error', 'text/plain'],
      [400, '{"message":"another shape"}', 'application/json'], [503, '{"error":"down"}', 'application/json'],
    ] as const) {
      answer = { status, body, type }
      await assert.rejects(s.process.get('x'), (e: unknown) => {
        assert.ok(e instanceof UnexpectedResponseError, `${status} ${body.slice(0, 30)}: ${String(e)}`)
        assert.deepEqual([e.code, e.status], ['unexpected_response', status])
        assert.ok(e.message.includes(`HTTP ${status}`) && e.message.length < 300, e.message)
        return true
      })
    }
    // A proxy's 503 that says when to come back: retryAfter is kept.
    answer = { status: 503, body: '<html>busy</html>', type: 'text/html' }
    const busy: typeof fetch = async (input, init) => {
      const res = await fetch(input, init)
      return new Response(await res.text(), { status: res.status, headers: { 'retry-after': '7' } })
    }
    await assert.rejects(new Sandbox({ url, token: 't', fetch: busy }).process.get('x'),
      (e: unknown) => e instanceof UnexpectedResponseError && e.retryAfter === 7)
  })

  test('a redirect is not followed: the request is not sent again elsewhere, and the call rejects', async () => {
    const s = new Sandbox({ url, token: 't' })
    for (const status of [301, 302, 303, 307, 308]) {
      answer = { status, body: '', location: '/elsewhere/v1/processes/run' }
      asked.length = 0
      await assert.rejects(s.exec('echo once'), (e: unknown) => {
        assert.ok(e instanceof UnexpectedResponseError, `${status}: ${String(e)}`)
        assert.deepEqual([e.code, e.status], ['unexpected_response', status])
        return true
      })
      assert.deepEqual(asked, ['POST /v1/processes/run'], `${status}: what the server was asked`)
    }
  })

  test('an answer that is not the API\'s (an HTML page, an empty body, another shape) is UnexpectedResponseError', async () => {
    const s = new Sandbox({ url, token: 't' })
    for (const body of ['<html>bad gateway</html>', '[]', '"text"']) {
      answer = { status: 200, body }
      await assert.rejects(s.process.get('x'), (e: unknown) => e instanceof UnexpectedResponseError && e.code === 'unexpected_response', body)
      await assert.rejects(s.exec('true'), (e: unknown) => e instanceof UnexpectedResponseError, body)
    }
    answer = { status: 200, body: '' }
    await assert.rejects(s.exec('true'), (e: unknown) => e instanceof UnexpectedResponseError, 'an empty body')
    // An object without what its route answers: a handle with no id, a
    // result with no reason, were taken.
    answer = { status: 200, body: '{}' }
    const shapeless = (what: string) => (e: unknown) => e instanceof UnexpectedResponseError && e.code === 'unexpected_response' || assert.fail(`${what}: ${String(e)}`)
    await assert.rejects(s.process.start('true'), shapeless('start'))
    await assert.rejects(s.process.createSession({}), shapeless('createSession'))
    await assert.rejects(s.process.get('x'), shapeless('get'))
    await assert.rejects(s.exec('true'), shapeless('exec'))
    await assert.rejects(s.process.connect('p1').wait(), shapeless('wait'))
    answer = { status: 200, body: '{"ready":false,"result":{}}' }
    await assert.rejects(s.process.connect('p1').ready({ port: 80 }), shapeless('ready'))
    // wait and ready too: they asked again at once, for ever.
    for (const body of ['', '[1,2]']) {
      answer = { status: 200, body }
      const h = s.process.connect('p1')
      await assert.rejects(h.wait(), (e: unknown) => e instanceof UnexpectedResponseError, `wait, ${JSON.stringify(body)}`)
      await assert.rejects(h.wait({ timeout: 3000 }), (e: unknown) => e instanceof UnexpectedResponseError, `wait with a timeout, ${JSON.stringify(body)}`)
      await assert.rejects(h.ready({ port: 80 }), (e: unknown) => e instanceof UnexpectedResponseError, `ready, ${JSON.stringify(body)}`)
    }
  })

  test('an answer of another shape carries its status, and a list or a logs page needs its items', async () => {
    const s = new Sandbox({ url, token: 't' })
    const h = s.process.connect('p1')
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['exec', () => s.exec('true')], ['get', () => s.process.get('x')], ['start', () => s.process.start('true')],
      ['list', () => s.process.list()], ['pty list', () => s.pty.list()], ['logs', () => h.logs()],
      ['wait', () => h.wait()], ['interact', () => h.interact()],
    ]
    // A server that answers every route 200 with what no route of the API
    // answers: each call rejects with that status, not 0 (no answer in time).
    for (const body of ['', '[1,2]', '{"detail":"x"}', '{"items":"x","reason":"exited","id":"p1"}']) {
      answer = { status: 200, body }
      for (const [what, call] of calls) {
        if (what !== 'list' && what !== 'pty list' && what !== 'logs' && body.includes('items')) continue
        await assert.rejects(call(), (e: unknown) => {
          assert.ok(e instanceof UnexpectedResponseError, `${what}, ${JSON.stringify(body)}: ${String(e)}`)
          assert.deepEqual([e.code, e.status], ['unexpected_response', 200], `${what}, ${JSON.stringify(body)}: ${e.message}`)
          assert.ok(!e.message.includes('undefined'), e.message)
          return true
        })
      }
    }
    // A 202 of another shape: the status is 202.
    answer = { status: 202, body: '{"detail":"x"}' }
    await assert.rejects(h.interact(), (e: unknown) => e instanceof UnexpectedResponseError && e.status === 202)
  })

  test('a log stream resumed past its end reports a wait of another shape, not tries it again', async () => {
    const asked: string[] = []
    route = (path) => {
      asked.push(path.replace(/\?.*/, ''))
      // The stream says the process ended (204); its wait answers what is not the API's.
      if (path.includes('/logs/stream')) return { status: 204, body: '' }
      return { status: 200, body: '{"detail":"x"}' }
    }
    try {
      const s = new Sandbox({ url, token: 't' })
      const evs = []
      for await (const ev of s.process.connect('p1').streamLogs({ cursor: 'c1' })) evs.push(ev)
      assert.equal(evs.length, 1, JSON.stringify(evs))
      const ev = evs[0]!
      assert.equal(ev.type, 'error')
      const err = ev.type === 'error' ? ev.error : undefined
      assert.ok(err instanceof UnexpectedResponseError && err.status === 200, String(err))
      assert.deepEqual(asked, ['/v1/processes/p1/logs/stream', '/v1/processes/p1/wait'])
    } finally {
      route = undefined
    }
  })

  test('values the SDK does not know become unknown, kept raw; unknown fields are kept', async () => {
    const s = new Sandbox({ url, token: 't' })
    answer = {
      status: 200,
      body: JSON.stringify({ id: 'p1', kind: 'vm', state: 'frozen', system: false, stdin: 'tty', keepLogs: 'forever', reason: 'vanished', exitCode: 9, futureField: { a: 1 } }),
    }
    const p = await s.process.get('p1')
    assert.deepEqual(
      [p.kind, p.rawKind, p.state, p.rawState, p.stdin, p.rawStdin, p.keepLogs, p.rawKeepLogs, p.reason, p.rawReason],
      ['unknown', 'vm', 'unknown', 'frozen', 'unknown', 'tty', 'unknown', 'forever', 'unknown', 'vanished'],
    )
    assert.deepEqual((p as unknown as Record<string, unknown>).futureField, { a: 1 })
    answer = { status: 200, body: JSON.stringify({ reason: 'evaporated', exitCode: 1, extra: true }) }
    const w = await s.process.connect('p1').wait()
    assert.deepEqual(w, { reason: 'unknown', rawReason: 'evaporated', exitCode: 1, extra: true })
  })

  test('run pages back the frames an answer left out (omittedBytes, omittedAfter)', async () => {
    const frame = (n: number, channel = 'stdout'): LogFrame => ({ cursor: `c${n}`, channel, data: `f${n}\n`, encoding: 'text', timestamp: n })
    const seen: string[] = []
    route = (path) => {
      seen.push(path)
      if (path.startsWith('/v1/processes/run')) {
        return {
          status: 200,
          body: JSON.stringify({
            reason: 'exited', exitCode: 0, processId: 'p9', output: 'f1\nf5\n', stdout: 'f1\n', stderr: 'f5\n',
            logs: [frame(1), frame(5, 'stderr')], omittedBytes: 9, omittedAfter: 'c1', next: 'c5',
          }),
        }
      }
      // Pages of two frames from after the cursor asked for.
      const after = Number(/cursor=c(\d+)/.exec(path)?.[1] ?? 0)
      const items = [2, 3, 4, 5].filter((n) => n > after).slice(0, 2).map((n) => frame(n, n === 5 ? 'stderr' : 'stdout'))
      return { status: 200, body: JSON.stringify({ items, next: items.at(-1)?.cursor ?? `c${after}`, truncatedHead: false }) }
    }
    try {
      const s = new Sandbox({ url, token: 't', logsPageSize: 2 })
      const r = await s.process.run('anything')
      assert.deepEqual(r.logs.map((f) => f.cursor), ['c1', 'c2', 'c3', 'c4', 'c5'])
      assert.equal(r.output, 'f1\nf2\nf3\nf4\nf5\n')
      assert.equal(r.stdout, 'f1\nf2\nf3\nf4\n')
      assert.equal(r.stderr, 'f5\n')
      assert.equal((r as { omittedBytes?: number }).omittedBytes, undefined)
      assert.deepEqual(seen.filter((p) => p.includes('/logs')), ['/v1/processes/p9/logs?cursor=c1&limit=2', '/v1/processes/p9/logs?cursor=c3&limit=2'])
    } finally {
      route = undefined
    }
  })

  test('the services and handles can be built from a transport directly', async () => {
    const s = new Sandbox({ url, token: 't' })
    answer = { status: 200, body: JSON.stringify({ items: [{ id: 'p2', kind: 'pty', state: 'running', system: false }], next: '' }) }
    const pty = new PtyService(new ProcessService(s.transport, 'other'))
    const list = await pty.list()
    assert.deepEqual(list.items.map((p) => [p.id, p.kind]), [['p2', 'pty']])
    assert.equal(list.next, undefined)
    const h = new ProcessHandle(s.transport, 'other', 'p2', 'pty')
    assert.deepEqual(h.toJSON(), { sandboxId: 'other', processId: 'p2', kind: 'pty' })
    answer = { status: 200, body: JSON.stringify({ id: 'p2', kind: 'pty', state: 'running', system: false }) }
    assert.equal((await h.get()).rawState, 'running')
  })
})
