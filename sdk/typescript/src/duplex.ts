// PtyDuplex: a WebSocket attached to a PTY process. The global WebSocket
// where the runtime has one, else the `ws` package (Node 20).

import { type ConchError, DeadlineExceededError, errorFrom, UnexpectedResponseError } from './errors.js'
import { type HttpTransport, inputOf, type WebSocketConstructor, type WebSocketEventLike, type WebSocketLike } from './transport.js'

const encoder = new TextEncoder()

/**
 * Bytes a readable holds unread before it stops reading the socket (over a
 * WebSocket that can pause, as the `ws` package's can): the daemon then holds
 * the PTY's output back, as for any slow reader.
 */
const highWater = 1 << 20
/**
 * Over a WebSocket that cannot pause (the global one of Node 22 and
 * browsers), the most a readable holds: what comes beyond is dropped and
 * reported as a gap.
 */
const maxQueued = 16 << 20
/**
 * Input written and not yet sent at or above which `drain()` waits until
 * all of it is sent: a Node writable's highWaterMark, where its write()
 * would return false and 'drain' comes once its buffer is empty.
 */
const writeHighWater = 1 << 20
/**
 * The most input a duplex holds unsent. A write that would pass it throws
 * PtyInputFullError and sends nothing: write() returns void, so it can
 * neither wait nor say "slow down", and holding without end is what a
 * caller that never looks would get otherwise. 16 MiB is also the daemon's
 * default --body-limit, past which one message closes the attachment.
 */
const maxUnsent = 16 << 20
/**
 * The largest message an attachment takes (1 MiB, the Python SDK's bound;
 * the daemon sends 32 KiB at most): a larger one is not the API's, and the
 * connection is closed (1009) rather than the message held. The `ws`
 * package refuses it before it is read whole (maxPayload).
 */
const maxMessage = 1 << 20
/** How often a duplex with unsent input looks at what its socket still holds: no WebSocket says when it sent. */
const sendPoll = 10
/**
 * How long a close() during which nothing moves (no input goes out, no
 * message comes in) waits before it ends the socket without its closing
 * handshake, where the WebSocket can (`ws`'s terminate): the handshake waits
 * behind the input not yet taken, which a daemon whose program reads nothing
 * takes no more of — in this socket or already in the daemon's, where
 * nothing is left unsent here — and `ws` would give up only 30 s later,
 * holding the process open meanwhile. Input that moves, however slowly, is
 * waited for.
 */
const closeStall = 2000
/** How often close() looks whether anything moved (see closeStall). */
const closeLook = 100

/**
 * What bounds the wait of a duplex on a daemon that sends nothing: `ms`
 * with no message and no ping from it while the readable reads (the
 * transport's streamIdleTimeout), and `what` names the attachment in the
 * error.
 */
export interface PtyIdleBound {
  ms: number
  what: string
}

/** A gap in a PTY's output: `bytes` were dropped before this reader read them. */
export interface PtyGap {
  bytes: number
}

/**
 * What `PtyDuplex.readable` throws where the output has a gap and no `gap`
 * listener is registered; iterating `readable` again goes on after the gap.
 */
export class PtyGapError extends Error {
  constructor(readonly bytes: number) {
    super(`conch: ${bytes} bytes of PTY output were dropped before they were read`)
    this.name = 'PtyGapError'
  }
}

/**
 * What `PtyDuplex.write` throws where the input it already holds unsent and
 * this write's would pass 16 MiB: nothing of this write was sent. The
 * program does not read its input (or the network is slower than the
 * writer): `await connection.drain()` between writes.
 */
export class PtyInputFullError extends Error {
  constructor(
    /** Bytes of the write refused. */
    readonly bytes: number,
    /** Bytes written before it and not yet sent. */
    readonly bufferedBytes: number,
  ) {
    super(`conch: PTY input not sent: ${bufferedBytes} bytes written before are not yet sent, and ${bytes} more would pass the ${maxUnsent}-byte bound; await drain() between writes`)
    this.name = 'PtyInputFullError'
  }
}

/**
 * A duplex with a PTY: what it wrote (retained, then live) and what to type
 * into it. Every byte the PTY wrote reaches `readable`, or a gap says how
 * many were dropped: the daemon holds the PTY's output back for a reader
 * that falls behind, up to a 5 s stall, and `readable` stops reading the
 * socket while it holds `highWater` unread bytes. Input goes as the daemon
 * takes it, which it does not while the program leaves its input unread: a
 * writer awaits `drain()`, and `write` refuses what would leave more than
 * `maxUnsent` unsent.
 */
export class PtyDuplex {
  /**
   * The PTY's output: what was retained, then live bytes; ends when the
   * process ended. Where the output has a gap, `gap` listeners are called,
   * in order with the bytes; without one, it throws a PtyGapError there.
   * One iteration at a time: another begun while one is under way (not yet
   * ended, broken out of or `return()`ed) throws at once; one begun after
   * it goes on where it stopped. For a second reader, attach again: each
   * connection gets all the output.
   */
  readonly readable: AsyncIterable<Uint8Array>
  readonly #socket: WebSocketLike
  readonly #pending: (Uint8Array | string)[] = []
  #pendingBytes = 0
  /** Unsent input as last seen (at a write, drain() or a poll); what was lost when the connection closed. */
  #lastUnsent = 0
  /** Set once the connection closed: the input it held unsent then, as last seen. */
  #unsentAtClose: number | undefined
  #poll: ReturnType<typeof setInterval> | undefined
  readonly #drainWaiters: { resolve(): void; reject(err: Error): void }[] = []
  readonly #gapListeners = new Set<(gap: PtyGap) => void>()
  #open = false
  #closed = false
  #userClosed = false
  #paused = false
  #missed = 0
  /** The daemon's side sent a message over maxMessage. */
  #tooLarge = false
  /** Messages received: after close(), what moves (see closeStall). */
  #heard = 0
  readonly #queue: Queue
  readonly #idle: PtyIdleBound | undefined
  /** When a message or a ping came last (or the reading resumed). */
  #heardAt = 0
  #idleTimer: ReturnType<typeof setTimeout> | undefined
  #idleDue: ReturnType<typeof setImmediate> | undefined
  /** Set once the daemon sent nothing for idle.ms: readable's error. */
  #idleError: DeadlineExceededError | undefined

  /**
   * Used by ProcessHandle.attach, which waits for the socket to open. With
   * idle, over a WebSocket that shows the daemon's pings (the `ws`
   * package's), the connection ends with a DeadlineExceededError once
   * nothing came from the daemon, neither a message nor a ping, for
   * idle.ms while the readable reads.
   */
  constructor(socket: WebSocketLike, idle?: PtyIdleBound) {
    this.#socket = socket
    // A bound past what a timer holds (Infinity) is none: setTimeout would fire at once.
    this.#idle = idle !== undefined && idle.ms <= 2 ** 31 - 1 && typeof socket.on === 'function' ? idle : undefined
    socket.binaryType = 'arraybuffer'
    const canPause = typeof socket.pause === 'function' && typeof socket.resume === 'function'
    const queue = new Queue({
      gap: (bytes) => {
        this.#missed += bytes
        if (this.#gapListeners.size === 0) throw new PtyGapError(bytes)
        for (const l of [...this.#gapListeners]) l({ bytes })
      },
      drained: () => {
        if (this.#paused && queue.bytes <= highWater / 2) {
          this.#paused = false
          socket.resume?.()
          this.#heardAt = Date.now()
          this.#armIdle()
        }
      },
    })
    this.#queue = queue
    if (this.#idle !== undefined) {
      socket.on?.('ping', () => {
        this.#heardAt = Date.now()
      })
    }
    socket.addEventListener('open', () => {
      this.#open = true
      for (const m of this.#pending.splice(0)) socket.send(m)
      this.#pendingBytes = 0
      this.#heardAt = Date.now()
      this.#armIdle()
    })
    socket.addEventListener('message', (ev) => {
      this.#heard++
      this.#heardAt = Date.now()
      // After close() nobody reads: what still comes (the output the
      // daemon's close frame waits behind) is dropped, and must not pause
      // the socket again, or the handshake would stall until ws gives up.
      if (this.#userClosed) return
      const size = typeof ev.data === 'string' ? ev.data.length : ev.data instanceof ArrayBuffer || ArrayBuffer.isView(ev.data) ? ev.data.byteLength : 0
      if (size > maxMessage) {
        this.#tooLarge = true
        socket.close(1009)
        return
      }
      if (typeof ev.data === 'string') {
        const bytes = gapBytes(ev.data)
        if (bytes !== undefined) queue.pushGap(bytes)
        return
      }
      let chunk: Uint8Array
      if (ev.data instanceof ArrayBuffer) chunk = new Uint8Array(ev.data)
      else if (ArrayBuffer.isView(ev.data)) chunk = new Uint8Array(ev.data.buffer, ev.data.byteOffset, ev.data.byteLength)
      else return
      if (!canPause && queue.bytes + chunk.length > maxQueued) {
        queue.pushGap(chunk.length)
        return
      }
      queue.push(chunk)
      if (canPause && !this.#paused && queue.bytes >= highWater) {
        this.#paused = true
        socket.pause?.()
        this.#disarmIdle() // nothing comes while this side reads nothing
      }
    })
    socket.addEventListener('error', (ev) => {
      const code = (ev.error as { code?: unknown } | undefined)?.code
      if (code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') this.#tooLarge = true
    })
    socket.addEventListener('close', (ev) => {
      this.#closed = true
      this.#disarmIdle()
      this.#settleDrains()
      if (this.#idleError !== undefined && !this.#userClosed) queue.fail(this.#idleError)
      else if (this.#tooLarge && !this.#userClosed) {
        queue.fail(new UnexpectedResponseError(`conch: the attachment sent a message over ${maxMessage} bytes, larger than any of the API`, 101))
      } else if (ev.code === undefined || ev.code === 1000 || ev.code === 1005 || this.#userClosed) queue.end()
      else queue.fail(new Error(`conch: attach closed with ${ev.code}${ev.reason ? `: ${ev.reason}` : ''}`))
    })
    this.readable = queue
  }

  /**
   * Looks, idle.ms after the last message or ping, whether another came:
   * if none did, the daemon is stopped or gone (or a network holds the
   * connection), since it pings every 15 s, and the connection ends. Not
   * while the socket is paused: nothing comes then. The look waits for
   * what the socket received meanwhile, read late when this process was
   * held up (a loaded machine, a long synchronous task).
   */
  #armIdle(): void {
    const idle = this.#idle
    if (idle === undefined || this.#closed || this.#userClosed || this.#paused || this.#idleError !== undefined) return
    this.#disarmIdle()
    const left = Math.max(0, this.#heardAt + idle.ms - Date.now())
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined
      this.#idleDue = setImmediate(() => {
        this.#idleDue = undefined
        if (this.#closed || this.#userClosed || this.#paused) return
        if (Date.now() - this.#heardAt < idle.ms) {
          this.#armIdle()
          return
        }
        this.#idleError = new DeadlineExceededError(`conch: ${idle.what}: nothing from the daemon, not even a ping, within ${idle.ms} ms`)
        this.#queue.fail(this.#idleError)
        if (typeof this.#socket.terminate === 'function') this.#socket.terminate()
        else this.#socket.close()
      })
    }, left)
    // The socket keeps a process alive while it is open; the timer need not.
    ;(this.#idleTimer as { unref?(): void }).unref?.()
  }

  #disarmIdle(): void {
    clearTimeout(this.#idleTimer)
    clearImmediate(this.#idleDue)
    this.#idleTimer = undefined
    this.#idleDue = undefined
  }

  /** Bytes received and not yet read from `readable`. */
  get queuedBytes(): number {
    return this.#queue.bytes
  }

  /** Bytes of the gaps `readable` has reached so far. */
  get missedBytes(): number {
    return this.#missed
  }

  /** Calls listener at each gap in the output, when `readable` reaches it. */
  on(event: 'gap', listener: (gap: PtyGap) => void): this {
    if (event === 'gap') this.#gapListeners.add(listener)
    return this
  }

  /** Removes a listener added with `on`. */
  off(event: 'gap', listener: (gap: PtyGap) => void): this {
    if (event === 'gap') this.#gapListeners.delete(listener)
    return this
  }

  /**
   * Bytes given to `write` and not yet sent to the daemon (held here or by
   * the socket); 0 once the connection is closed. They grow while the
   * program leaves its input unread, as the daemon then reads no more.
   */
  get bufferedBytes(): number {
    if (this.#unsentAtClose !== undefined) return 0
    return this.#pendingBytes + (this.#socket.bufferedAmount ?? 0)
  }

  /**
   * Types data into the PTY; throws once the connection is closed (by
   * `close()` too), and throws PtyInputFullError, sending nothing, where it
   * would leave more than 16 MiB unsent: a writer of much input awaits
   * `drain()` after each write.
   */
  write(data: string | Uint8Array): void {
    const input = inputOf(data)
    if (this.#closed || this.#userClosed) throw new Error('conch: write to a closed PTY connection')
    const msg = typeof input === 'string' ? encoder.encode(input) : input
    const unsent = this.bufferedBytes
    if (unsent + msg.length > maxUnsent) throw new PtyInputFullError(msg.length, unsent)
    if (this.#open) this.#socket.send(msg)
    else {
      this.#pending.push(msg)
      this.#pendingBytes += msg.length
    }
    this.#watch()
  }

  /**
   * Resolves at once while less than 1 MiB written is unsent (as a Node
   * writable's write() returns true), else once all of it is sent to the
   * daemon (its 'drain'). Rejects if the connection closes first with input
   * unsent, and at once on a connection that closed so; resolves on one
   * that closed with none.
   */
  drain(): Promise<void> {
    if (this.#unsentAtClose !== undefined) {
      return this.#unsentAtClose > 0 ? Promise.reject(this.#unsentError()) : Promise.resolve()
    }
    if (this.#watch() < writeHighWater) return Promise.resolve()
    return new Promise((resolve, reject) => this.#drainWaiters.push({ resolve, reject }))
  }

  /**
   * Notes what is unsent now, and looks again every few ms while some is:
   * the socket says when it sent nothing, and what it held is gone from
   * its count once it closed. Returns what is unsent.
   */
  #watch(): number {
    const unsent = this.bufferedBytes
    this.#lastUnsent = unsent
    if (unsent === 0) {
      for (const w of this.#drainWaiters.splice(0)) w.resolve()
      clearInterval(this.#poll)
      this.#poll = undefined
    } else if (this.#poll === undefined && this.#unsentAtClose === undefined) {
      this.#poll = setInterval(() => this.#watch(), sendPoll)
      // The socket keeps a process alive while it is open; the poll need not.
      ;(this.#poll as { unref?(): void }).unref?.()
    }
    return unsent
  }

  /** At the close: drain() settles by the input then unsent, as last seen. */
  #settleDrains(): void {
    if (this.#unsentAtClose !== undefined) return
    this.#unsentAtClose = this.#lastUnsent
    clearInterval(this.#poll)
    this.#poll = undefined
    const waiters = this.#drainWaiters.splice(0)
    for (const w of waiters) {
      if (this.#unsentAtClose > 0) w.reject(this.#unsentError())
      else w.resolve()
    }
  }

  #unsentError(): Error {
    return new Error(`conch: the PTY connection closed with ${this.#unsentAtClose} bytes of input not sent`)
  }

  /** Closes the connection: `readable` ends after what it already received; the process goes on. */
  close(): void {
    this.#userClosed = true
    this.#disarmIdle()
    this.#queue.end()
    if (this.#paused) {
      this.#paused = false
      this.#socket.resume?.() // the close handshake needs the socket read
    }
    this.#socket.close(1000)
    this.#endIfStalled(this.bufferedBytes, this.#heard, 0)
  }

  /**
   * After close(): ends the socket once nothing moved for closeStall ms,
   * neither its unsent input nor the messages before the daemon's close
   * frame (see closeStall). Nothing left unsent is no sign that an answer
   * will come.
   */
  #endIfStalled(unsent: number, heard: number, still: number): void {
    const terminate = this.#socket.terminate
    if (this.#closed || typeof terminate !== 'function') return
    setTimeout(() => {
      const now = this.bufferedBytes
      const stood = now < unsent || this.#heard !== heard ? 0 : still + closeLook
      if (!this.#closed && stood >= closeStall) terminate.call(this.#socket)
      else this.#endIfStalled(now, this.#heard, stood)
    }, closeLook)
  }
}

/** The bytes of a gap message of the attach protocol, or undefined for any other text. */
function gapBytes(text: string): number | undefined {
  try {
    const m = JSON.parse(text) as { type?: unknown; bytes?: unknown }
    if (m && m.type === 'gap' && typeof m.bytes === 'number') return m.bytes
  } catch {}
  return undefined
}

/** Opens an attach socket to the PTY process id; resolves once it is open. */
export async function openDuplex(t: HttpTransport, id: string): Promise<PtyDuplex> {
  const WS = t.WebSocket ?? (await defaultWebSocket())
  const socket = new WS(t.socketURL(`/v1/processes/${encodeURIComponent(id)}/attach`), { headers: t.socketHeaders(), maxPayload: maxMessage })
  const duplex = new PtyDuplex(socket, { ms: t.streamIdleTimeout, what: `attach to ${id} at ${t.url}` })
  // Neither WebSocket bounds its handshake: a daemon that takes the
  // connection and never answers the upgrade would hold the attach for ever.
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => {
        reject(new DeadlineExceededError(`conch: attach to ${id}: no answer from ${t.url} within ${t.requestTimeout} ms`))
        socket.close()
      }, t.requestTimeout)
      socket.addEventListener('open', () => resolve())
      socket.addEventListener('error', (ev: WebSocketEventLike) => reject(refusal(ev, id) ?? socketError(ev)))
      socket.addEventListener('close', (ev) => reject(new Error(`conch: attach closed before it opened (${ev.code})`)))
    })
  } finally {
    clearTimeout(timer)
  }
  return duplex
}

/**
 * The ConchError of a handshake refused with an HTTP status (a proxy's 502,
 * the daemon's 404), named by its status as an answer without a body is: the
 * ws package says the status only in its error's message, and reads no body.
 * undefined for any other failure, and for a WebSocket that does not tell
 * the status (the global one of browsers and of Node 22 and later).
 */
function refusal(ev: WebSocketEventLike, id: string): ConchError | undefined {
  const m = ev.error instanceof Error ? /^Unexpected server response: (\d{3})$/.exec(ev.error.message) : null
  if (m === null) return undefined
  const status = Number(m[1])
  const err = errorFrom(status, '')
  if (!(err instanceof UnexpectedResponseError)) return err
  return new UnexpectedResponseError(`conch: attach to ${id}: the handshake was refused with HTTP ${status}, an answer that is not the API's`, status)
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

type Item = Uint8Array | { gap: number }

/**
 * An async iterable of the PTY's bytes, fed by push: one iteration at a
 * time, as a ReadableStream has one reader. An iteration holds the queue
 * from its start until it ends (its last item, an error such as a gap's, or
 * `return()`: a `for await` that breaks); another begun meanwhile throws at
 * once, as two would otherwise take turns at the bytes and one of them wait
 * for ever. A new iteration goes on where the last one stopped.
 */
class Queue implements AsyncIterable<Uint8Array> {
  readonly #items: Item[] = []
  readonly #hooks: { gap(bytes: number): void; drained(): void }
  #done = false
  #error: Error | undefined
  #wake: (() => void) | undefined
  /** An iteration holds the queue. */
  #held = false
  /** Bytes of the queued chunks. */
  bytes = 0

  constructor(hooks: { gap(bytes: number): void; drained(): void }) {
    this.#hooks = hooks
  }

  push(v: Uint8Array): void {
    if (this.#done) return
    this.#items.push(v)
    this.bytes += v.length
    this.#notify()
  }

  /** Queues a gap of n bytes, merged with a gap queued last. */
  pushGap(n: number): void {
    if (this.#done || n <= 0) return
    const last = this.#items[this.#items.length - 1]
    if (last && !(last instanceof Uint8Array)) last.gap += n
    else this.#items.push({ gap: n })
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

  [Symbol.asyncIterator](): AsyncIterableIterator<Uint8Array> {
    if (this.#held) {
      throw new Error('conch: PtyDuplex.readable is read by another iteration already: end it first (break, or return()), or attach again for a reader of its own')
    }
    this.#held = true
    let ended = false
    const end = (): IteratorReturnResult<undefined> => {
      if (!ended) {
        ended = true
        this.#held = false
        this.#notify() // a next() still waiting ends too
      }
      return { done: true, value: undefined }
    }
    const step = async (): Promise<IteratorResult<Uint8Array, undefined>> => {
      try {
        const value = await this.#next(() => ended)
        return value === undefined ? end() : { done: false, value }
      } catch (err) {
        end()
        throw err
      }
    }
    // next() calls overlapping on one iteration take their turns, as an async generator's do.
    let last: Promise<unknown> = Promise.resolve()
    return {
      next: () => {
        const p = last.then(step)
        last = p.catch(() => {})
        return p
      },
      return: async () => end(),
      [Symbol.asyncIterator]() {
        return this
      },
    }
  }

  /** The next chunk, or undefined at the end or once ended() holds. */
  async #next(ended: () => boolean): Promise<Uint8Array | undefined> {
    for (;;) {
      if (ended()) return undefined
      const item = this.#items.shift()
      if (item instanceof Uint8Array) {
        this.bytes -= item.length
        this.#hooks.drained()
        return item
      }
      if (item) {
        this.#hooks.gap(item.gap) // throws without a listener
        continue
      }
      if (this.#done) {
        if (this.#error) throw this.#error
        return undefined
      }
      await new Promise<void>((resolve) => (this.#wake = resolve))
    }
  }
}
