// PtyDuplex: a WebSocket attached to a PTY process. The global WebSocket
// where the runtime has one, else the `ws` package (Node 20).

import type { HttpTransport, WebSocketConstructor, WebSocketEventLike, WebSocketLike } from './transport.js'

const encoder = new TextEncoder()

/** A duplex with a PTY: what it wrote (retained, then live) and what to type into it. */
export class PtyDuplex {
  /** The PTY's output: what was retained, then live bytes; ends when the process ended. */
  readonly readable: AsyncIterable<Uint8Array>
  readonly #socket: WebSocketLike
  readonly #pending: (Uint8Array | string)[] = []
  #open = false
  #closed = false
  #userClosed = false
  readonly #queue: Queue<Uint8Array>

  /** Used by ProcessHandle.attach, which waits for the socket to open. */
  constructor(socket: WebSocketLike) {
    this.#socket = socket
    socket.binaryType = 'arraybuffer'
    const queue = new Queue<Uint8Array>()
    this.#queue = queue
    socket.addEventListener('open', () => {
      this.#open = true
      for (const m of this.#pending.splice(0)) socket.send(m)
    })
    socket.addEventListener('message', (ev) => {
      if (ev.data instanceof ArrayBuffer) queue.push(new Uint8Array(ev.data))
      else if (ArrayBuffer.isView(ev.data)) queue.push(new Uint8Array(ev.data.buffer, ev.data.byteOffset, ev.data.byteLength))
    })
    socket.addEventListener('close', (ev) => {
      this.#closed = true
      if (ev.code === undefined || ev.code === 1000 || ev.code === 1005 || this.#userClosed) queue.end()
      else queue.fail(new Error(`conch: attach closed with ${ev.code}${ev.reason ? `: ${ev.reason}` : ''}`))
    })
    this.readable = queue
  }

  /** Types data into the PTY. */
  write(data: string | Uint8Array): void {
    if (this.#closed) throw new Error('conch: write to a closed PTY connection')
    const msg = typeof data === 'string' ? encoder.encode(data) : data
    if (this.#open) this.#socket.send(msg)
    else this.#pending.push(msg)
  }

  /** Closes the connection: `readable` ends after what it already received; the process goes on. */
  close(): void {
    this.#userClosed = true
    this.#queue.end()
    this.#socket.close(1000)
  }
}

/** Opens an attach socket to the PTY process id; resolves once it is open. */
export async function openDuplex(t: HttpTransport, id: string): Promise<PtyDuplex> {
  const WS = t.WebSocket ?? (await defaultWebSocket())
  const socket = new WS(t.socketURL(`/v1/processes/${encodeURIComponent(id)}/attach`), { headers: t.socketHeaders() })
  const duplex = new PtyDuplex(socket)
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve())
    socket.addEventListener('error', (ev: WebSocketEventLike) => reject(socketError(ev)))
    socket.addEventListener('close', (ev) => reject(new Error(`conch: attach closed before it opened (${ev.code})`)))
  })
  return duplex
}

function socketError(ev: WebSocketEventLike): Error {
  if (ev.error instanceof Error) return ev.error
  return new Error(`conch: attach failed${ev.message ? `: ${ev.message}` : ''}`)
}

let wsModule: Promise<WebSocketConstructor> | undefined

async function defaultWebSocket(): Promise<WebSocketConstructor> {
  const global = (globalThis as { WebSocket?: unknown }).WebSocket
  if (typeof global === 'function') return global as WebSocketConstructor
  wsModule ??= import('ws').then(
    (m) => m.WebSocket as unknown as WebSocketConstructor,
    () => {
      throw new Error('conch: attach needs a global WebSocket or the ws package (npm install ws)')
    },
  )
  return wsModule
}

/** An async iterable fed by push: one reader at a time. */
class Queue<T> implements AsyncIterable<T> {
  readonly #items: T[] = []
  #done = false
  #error: Error | undefined
  #wake: (() => void) | undefined

  push(v: T): void {
    if (this.#done) return
    this.#items.push(v)
    this.#notify()
  }

  end(): void {
    this.#done = true
    this.#notify()
  }

  fail(err: Error): void {
    this.#error = err
    this.end()
  }

  #notify(): void {
    const w = this.#wake
    this.#wake = undefined
    w?.()
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.#items.length) {
        yield this.#items.shift()!
        continue
      }
      if (this.#done) {
        if (this.#error) throw this.#error
        return
      }
      await new Promise<void>((resolve) => (this.#wake = resolve))
    }
  }
}
