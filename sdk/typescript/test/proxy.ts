// A TCP proxy in front of the daemon that can cut a connection mid-answer:
// a dropped network, for the stream's resume.

import { createServer, connect, type Server, type Socket } from 'node:net'

export interface Proxy {
  url: string
  /** Connections accepted so far. */
  connections: number
  /** Stream requests forwarded, and streams cut, so far. */
  streams: number
  cuts: number
  /** Cuts the next event stream after it has forwarded this many bytes of it. */
  cutAfter(bytes: number): void
  /** Cuts the next event stream just before the first place it holds text. */
  cutBefore(text: string): void
  /** Answers the nth stream request (counting from 1) itself, with this answer, and closes the connection. */
  failStream(n: number, answer: { status: number; body: string; headers?: Record<string, string> }): void
  /** Closes every connection at once from now on. */
  refuse(): void
  close(): Promise<void>
}

export async function startProxy(target: string): Promise<Proxy> {
  const { hostname, port } = new URL(target)
  let cut: number | undefined
  let cutText: string | undefined
  const failures = new Map<number, { status: number; body: string; headers?: Record<string, string> }>()
  let refusing = false
  const sockets = new Set<Socket>()
  const proxy: Proxy = {
    url: '',
    connections: 0,
    streams: 0,
    cuts: 0,
    cutAfter: (n) => { cut = n },
    cutBefore: (text) => { cutText = text },
    failStream: (n, answer) => { failures.set(n, answer) },
    refuse: () => { refusing = true },
    close: () => new Promise((r) => {
      for (const s of sockets) s.destroy()
      server.close(() => r())
    }),
  }
  const server: Server = createServer((client) => {
    proxy.connections++
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    if (refusing) {
      client.destroy()
      return
    }
    const upstream = connect(Number(port), hostname)
    sockets.add(upstream)
    // Connections are kept alive and reused: the stream is found by its
    // content type, and bytes are counted from its answer's start.
    let limit: number | undefined
    let sent = 0
    let before: string | undefined
    let seen = '' // the stream's answer so far, as latin1, while before is looked for
    client.on('data', (b: Buffer) => {
      if (b.includes('/logs/stream')) {
        const fail = failures.get(++proxy.streams)
        if (fail) {
          const head = [`HTTP/1.1 ${fail.status} Proxy`, `content-length: ${Buffer.byteLength(fail.body)}`, 'connection: close']
          for (const [k, v] of Object.entries(fail.headers ?? {})) head.push(`${k}: ${v}`)
          client.end(`${head.join('\r\n')}\r\n\r\n${fail.body}`)
          upstream.destroy()
          return
        }
      }
      upstream.write(b)
    })
    upstream.on('data', (b: Buffer) => {
      if (limit === undefined && cut !== undefined && b.includes('text/event-stream')) {
        limit = cut
        cut = undefined
      }
      if (before === undefined && cutText !== undefined && b.includes('text/event-stream')) {
        before = cutText
        cutText = undefined
      }
      if (before !== undefined) {
        const start = seen.length
        seen += b.toString('latin1')
        const at = seen.indexOf(before)
        if (at >= 0) {
          if (at > start) client.write(b.subarray(0, at - start))
          proxy.cuts++
          client.destroy()
          upstream.destroy()
          return
        }
      }
      if (limit !== undefined && sent + b.length >= limit) {
        client.write(b.subarray(0, limit - sent))
        proxy.cuts++
        client.destroy()
        upstream.destroy()
        return
      }
      if (limit !== undefined) sent += b.length
      client.write(b)
    })
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const addr = server.address()
  if (addr === null || typeof addr === 'string') throw new Error('proxy: no address')
  proxy.url = `http://127.0.0.1:${addr.port}`
  return proxy
}
