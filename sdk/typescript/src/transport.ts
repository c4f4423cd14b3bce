// HttpTransport: the daemon's base URL and token, and the fetch and
// WebSocket it is reached through. Every request goes through request(),
// which turns an error answer into a ConchError.

import { DeadlineExceededError, errorFrom, UnexpectedResponseError } from './errors.js'

/**
 * The longest wait one request asks of the daemon (ms): under the 300 s
 * after which Node's fetch (undici) gives up on an answer's headers, with
 * room for answerMargin.
 */
export const maxWaitWindow = 280_000

/**
 * The most frames a logs page asks for: the largest whole number a number
 * holds exactly, so that its ?limit= is an integer the daemon takes (up to
 * 2^63 − 1; Infinity or 1e300 were refused, once the command had run). A
 * page ends at 1 MiB of output long before.
 */
const maxLogsPageSize = Number.MAX_SAFE_INTEGER

/**
 * What a request that waits on the daemon for a time (a run's, wait's,
 * ready's or interact's timeout) is given beyond it to be answered (ms).
 */
export const answerMargin = 10_000

/**
 * How long the daemon may take to have a new session's shell or
 * interpreter ready (ms): it refuses one that is not ready by then, and a
 * session's creation is given that beyond requestTimeout.
 */
export const sessionReadyLimit = 30_000

/**
 * How long the daemon gives what it signalled to end before it sends KILL
 * (ms). The kill of a session or code context answers once it has ended:
 * escalateAfter (stopGrace when not given) after the signal, then KILL
 * stopGrace later at most; a kill is given that beyond requestTimeout.
 */
export const stopGrace = 5_000

/**
 * The longest a DELETE waits for what it stops (ms): TERM, KILL stopGrace
 * later, a session command's refusal stopGrace after that. A delete is given
 * that beyond requestTimeout.
 */
export const stopWait = 3 * stopGrace

/** What a message, open, close or error event of a WebSocket carries that the SDK reads. */
export interface WebSocketEventLike {
  type: string
  data?: unknown
  code?: number
  reason?: string
  message?: string
  error?: unknown
}

/** The browser-style WebSocket API, as the global `WebSocket` and the `ws` package offer it. */
export interface WebSocketLike {
  binaryType: string
  send(data: Uint8Array | string): void
  /**
   * Bytes given to send and not yet handed to the network (every WebSocket
   * has it); a PtyDuplex reads it for its writer's backpressure.
   */
  readonly bufferedAmount?: number
  close(code?: number, reason?: string): void
  addEventListener(type: 'open' | 'message' | 'close' | 'error', listener: (event: WebSocketEventLike) => void): void
  /** Stops reading the connection (the `ws` package's); a PtyDuplex uses it for backpressure. */
  pause?(): void
  /** Reads the connection again after pause. */
  resume?(): void
  /** Ends the connection without the closing handshake (the `ws` package's). */
  terminate?(): void
  /**
   * Adds a listener of the `ws` package's events: a PtyDuplex listens for
   * the daemon's pings, which it answers itself (the global WebSocket shows
   * none).
   */
  on?(event: 'ping', listener: () => void): unknown
}

/**
 * A WebSocket constructor that takes request headers in its second argument,
 * as Node's global `WebSocket` (undici), Bun's and the `ws` package do.
 */
/**
 * A WebSocket class: init's headers are the upgrade's; maxPayload, the
 * largest message taken, is the `ws` package's option (a class without it
 * may ignore it: the duplex checks each message too).
 */
export type WebSocketConstructor = new (url: string, init: { headers: Record<string, string>; maxPayload?: number }) => WebSocketLike

export interface HttpTransportOptions {
  /** The daemon's base URL, e.g. `http://127.0.0.1:7070`. */
  url: string
  /** Its bearer token. */
  token: string
  /** The `fetch` to use; the global one by default. */
  fetch?: typeof fetch
  /** The WebSocket for attach; the global one where it exists, else the `ws` package. */
  WebSocket?: WebSocketConstructor
  /**
   * The longest one request waits on the daemon (ms, default 30 000, at most
   * 280 000): a longer wait is several requests, so that no connection idles
   * for minutes, and none outlasts what fetch waits for an answer (300 s in Node).
   * A fraction is rounded up to a whole ms (`1000 / 3` is 334).
   */
  waitWindow?: number
  /**
   * Frames per page when `run` pages the logs (default 1000). A fraction is
   * rounded down to whole frames, at least 1 (`2.5` is 2); at most 2^53 − 1
   * (`Infinity` included).
   */
  logsPageSize?: number
  /**
   * How long a log stream (`streamLogs`) waits with nothing from the daemon,
   * not even the heartbeat it sends every 15 s, before it gives up with an
   * `error` event (ms, default 45 000); and a PTY's `readable` over the `ws`
   * package's WebSocket, with no output and no ping (sent every 15 s),
   * before it throws DeadlineExceededError.
   */
  streamIdleTimeout?: number
  /**
   * How long a request the daemon answers at once (`get`, `list`, `logs`,
   * `start`, `kill`, `stdin`, `delete`, ...) waits for its answer before it
   * rejects with `DeadlineExceededError` (ms, default 30 000); creating a
   * session is given 30 000 more, the daemon's own limit for a shell to be
   * ready. Requests that wait on the daemon for a time (`run`, `wait`,
   * `ready`, `interact`) are bounded by that time instead. A requestTimeout
   * of `Infinity` (or over 2^31 - 1 ms, 24.8 days) is no bound.
   */
  requestTimeout?: number
}

export type Query = Record<string, string | number | boolean | undefined>

export interface RequestOptions {
  query?: Query
  /** Sent as JSON. */
  json?: unknown
  /** Sent as it is (stdin). */
  body?: Uint8Array | string
  headers?: Record<string, string>
  signal?: AbortSignal
  /**
   * json() only: the answer, its body read, must have come within this many
   * ms, else the request is aborted and rejects with DeadlineExceededError;
   * the transport's requestTimeout when not given.
   */
  timeout?: number
}

export class HttpTransport {
  readonly url: string
  readonly fetch: typeof fetch
  readonly WebSocket: WebSocketConstructor | undefined
  readonly waitWindow: number
  readonly logsPageSize: number
  readonly streamIdleTimeout: number
  readonly requestTimeout: number
  // Private, so that console.log, util.inspect and JSON.stringify of a
  // transport or a sandbox never show the bearer token.
  readonly #token: string
  readonly #auth: Record<string, string>
  readonly #jsonHeaders: Record<string, string>

  /** The bearer token. */
  get token(): string {
    return this.#token
  }

  constructor(options: HttpTransportOptions) {
    for (const k of ['url', 'token'] as const) {
      // Never the token's value: it is a secret.
      if (typeof options[k] !== 'string') throw new TypeError(`conch: the ${k} must be a string, not ${typeName(options[k])}`)
    }
    if (!/^[\x20-\x7e]*$/.test(options.token)) {
      // Refused here, not by fetch's Headers at the first request, whose
      // message quotes the header, token and all.
      throw new TypeError(
        'conch: the token holds a character an HTTP header cannot carry (a control character, ' +
          'a line break or a non-ASCII one); check CONCH_TOKEN or the token file',
      )
    }
    this.url = options.url.replace(/\/+$/, '')
    this.#token = options.token
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis)
    this.WebSocket = options.WebSocket
    // Whole numbers: the daemon takes only integers (a wait's ?timeout=, a page's ?limit=).
    this.waitWindow = Math.min(Math.ceil(positive(options.waitWindow, 30_000)), maxWaitWindow)
    this.logsPageSize = Math.min(Math.max(1, Math.floor(positive(options.logsPageSize, 1000))), maxLogsPageSize)
    this.streamIdleTimeout = positive(options.streamIdleTimeout, 45_000)
    this.requestTimeout = positive(options.requestTimeout, 30_000)
    this.#auth = { authorization: `Bearer ${this.#token}` }
    this.#jsonHeaders = { ...this.#auth, 'content-type': 'application/json' }
  }

  /** Sends a request and returns its answer; an answer that is not 2xx rejects with its ConchError. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    let headers = options.json === undefined ? this.#auth : this.#jsonHeaders
    if (options.headers) headers = { ...headers, ...options.headers }
    // A redirect is not followed: the daemon answers none, and fetch's
    // default would send the request (a run, its body) again wherever one
    // pointed, and take that server's answer for the daemon's.
    const init: RequestInit = { method, headers, redirect: 'manual' }
    if (options.json !== undefined) init.body = JSON.stringify(options.json)
    else if (options.body !== undefined) init.body = options.body
    if (options.signal) init.signal = options.signal
    const res = await this.fetch(this.url + path + queryString(options.query), init)
    if (res.type === 'opaqueredirect') {
      // A browser's fetch hides a redirect's status and headers.
      throw new UnexpectedResponseError(`conch: an answer that is not the API's: a redirect (${method} ${path})`, 0)
    }
    if (res.status >= 300) throw errorFrom(res.status, await bodyText(res, method, path), res.headers.get('retry-after'))
    return res
  }

  /** Sends a request and returns its status and its JSON body (undefined when empty: 204, a kill's 202). */
  async json(method: string, path: string, options: RequestOptions = {}): Promise<{ status: number; body: unknown }> {
    const read = async (o: RequestOptions): Promise<{ status: number; body: unknown }> => {
      const res = await this.request(method, path, o)
      const text = await bodyText(res, method, path)
      if (text === '') return { status: res.status, body: undefined }
      try {
        return { status: res.status, body: JSON.parse(text) }
      } catch {
        throw new UnexpectedResponseError(`conch: an answer that is not JSON (HTTP ${res.status}): ${text.slice(0, 200)}`, res.status)
      }
    }
    // Bounded: a timer aborts the request, as the caller's signal does, so
    // that a daemon that does not answer (stopped, hung, a network that
    // holds the request) fails the call rather than leaving it to fetch's
    // own limit (300 s in Node) or none.
    const outer = options.signal
    if (outer?.aborted) throw outer.reason
    const ms = options.timeout ?? this.requestTimeout
    const ac = new AbortController()
    let late = false
    // A timer takes at most 2^31 - 1 ms (24.8 days): Node fires one set for
    // longer (Infinity, 2 ** 31) after 1 ms, which failed every call at once.
    // Longer than that is no bound at all.
    const timer = ms <= maxTimer ? setTimeout(() => {
      late = true
      ac.abort()
    }, ms) : undefined
    const onAbort = (): void => ac.abort(outer?.reason)
    outer?.addEventListener('abort', onAbort)
    try {
      return await read({ ...options, signal: ac.signal })
    } catch (err) {
      if (!late) throw err
      // What changes something may have been done by the daemon all the same.
      const done = method === 'GET' || method === 'HEAD' ? '' : '; it may have been carried out'
      throw new DeadlineExceededError(`conch: ${method} ${path}: no answer from ${this.url} within ${ms} ms${done}`, { cause: err })
    } finally {
      clearTimeout(timer)
      outer?.removeEventListener('abort', onAbort)
    }
  }

  /** The ws:// or wss:// URL of path. */
  socketURL(path: string): string {
    return this.url.replace(/^http/, 'ws') + path
  }

  /** The headers a WebSocket upgrade sends. */
  socketHeaders(): Record<string, string> {
    return { ...this.#auth }
  }
}

/**
 * The most bytes of an answer's body read (256 MiB, the Python SDK's
 * bound): far past any answer of the daemon, whose default --log-retention
 * (8 MiB) bounds a run's output. A larger body is not the API's answer:
 * read on, a body without end would be held until the call's time ran out,
 * or until the process ran out of memory.
 */
const maxAnswerBytes = 256 << 20

const utf8 = new TextDecoder()

/**
 * The text of res's body (as res.text() reads it: UTF-8, invalid bytes
 * replaced), at most maxAnswerBytes; a larger one, or one whose
 * Content-Length says it is, rejects with UnexpectedResponseError.
 */
async function bodyText(res: Response, method: string, path: string): Promise<string> {
  const tooLarge = (): UnexpectedResponseError =>
    new UnexpectedResponseError(
      `conch: ${method} ${path} answered HTTP ${res.status} with a body over ${maxAnswerBytes} bytes, larger than any answer of the API`,
      res.status,
    )
  const body = res.body
  if (body === null) return ''
  const length = Number(res.headers.get('content-length') ?? NaN)
  if (length > maxAnswerBytes) {
    await body.cancel().catch(() => {})
    throw tooLarge()
  }
  const reader = body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.length
    if (size > maxAnswerBytes) {
      await reader.cancel().catch(() => {})
      throw tooLarge()
    }
    chunks.push(value)
  }
  return utf8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size))
}

/** The longest delay setTimeout takes (ms); it fires a longer one at once. */
const maxTimer = 2 ** 31 - 1

function positive(v: number | undefined, def: number): number {
  return v !== undefined && v > 0 ? v : def
}

function queryString(q: Query | undefined): string {
  if (!q) return ''
  const parts: string[] = []
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === '') continue
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
  }
  return parts.length ? `?${parts.join('&')}` : ''
}

/** encodes a path segment. */
export function seg(id: string): string {
  return encodeURIComponent(id)
}

/**
 * data, input to send (stdin, interact's input, a PTY's keys), checked: a
 * string (sent as UTF-8; one with a lone surrogate is refused) or bytes.
 * Anything else is refused, not sent as fetch or Buffer.from would take it (5 as "5", an object as
 * "[object Object]", an array of numbers as those bytes).
 */
export function inputOf(data: unknown): string | Uint8Array {
  if (typeof data === 'string') {
    // A lone surrogate has no UTF-8: fetch and a WebSocket would send
    // U+FFFD in its place, other bytes than the caller's, where a JSON
    // field holding one is refused by the daemon (400).
    const lone = /[\ud800-\udfff]/u.exec(data)
    if (lone) {
      throw new TypeError(
        `conch: input holds a lone surrogate (U+${lone[0].charCodeAt(0).toString(16).toUpperCase()} at index ${lone.index}), ` +
          'which UTF-8 cannot carry; send bytes (a Uint8Array) for input that is not text',
      )
    }
    return data
  }
  if (data instanceof Uint8Array) return data
  throw new TypeError(`conch: input is a string or bytes (Uint8Array), not ${typeName(data)}`)
}

/** The type of v as a message names it: null, array or typeof's word. */
export function typeName(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v
}
