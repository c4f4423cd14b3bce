import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { WebSocket as WS } from 'ws'

import { NotFoundError, PtyDuplex, type Sandbox, UnsupportedOperationError } from '@conchsh/sdk'

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

  test('start runs the shell when there is no command; bytes written, close leaves it running', async () => {
    const h = await sb.pty.start(undefined, { shell: 'dash', env: { PS1: '$ ' } })
    const c = await h.attach()
    c.write(new TextEncoder().encode('echo $((6*7))\r'))
    const it = c.readable[Symbol.asyncIterator]()
    await readUntil(it, '42')
    c.close()
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
