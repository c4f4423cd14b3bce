// Compile-only: the SDK's core surface, used as its users program against it,
// every class, method, option, DTO field and union member. This file is
// type-checked by the test build and never run; a change to that surface
// fails the build.

import {
  type CreateSessionOptions, type HttpTransport, type KeepLogs, type KillOptions, type ListResult, type LogFrame,
  type LogsOptions, type LogsPage, type ProcessBinding, type ProcessCommand, type ProcessDto, ProcessHandle,
  type ProcessHandleJSON, type ProcessKeepLogs, type ProcessKind, type ProcessListOptions, type ProcessReason,
  type ProcessReportedKind, ProcessService, type ProcessSignal, type ProcessStartOptions, type ProcessState,
  type ProcessStdinMode, PtyDuplex, PtyService, type RunOptions, type RunResult, Session, type SessionJSON,
  type SessionRunOptions, type SessionStartOptions, type StreamLogEvent, type StreamLogsOptions, type TerminalSize,
  type WaitProcessOptions, type WaitResult,
} from '@conchsh/sdk'

/** Compiles only when A and B are the same type. */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
function same<T extends true>(): T | undefined {
  return undefined
}

// Unions, member by member.
same<Equals<ProcessKind, 'exec' | 'pty' | 'code' | 'session'>>()
same<Equals<ProcessReportedKind, ProcessKind | 'unknown'>>()
same<Equals<ProcessState, 'starting' | 'provisioning' | 'running' | 'terminal' | 'unknown'>>()
same<Equals<ProcessSignal, 'TERM' | 'KILL' | 'INT' | 'HUP' | 'QUIT' | 'USR1' | 'USR2'>>()
same<Equals<ProcessReason, 'exited' | 'signaled' | 'timed_out' | 'lost' | 'failed' | 'unknown'>>()
same<Equals<KeepLogs, 'until_cleanup' | 'on_exit_ttl' | 'none'>>()
same<Equals<ProcessKeepLogs, KeepLogs | 'unknown'>>()
same<Equals<ProcessStdinMode, 'closed' | 'open' | 'unknown'>>()
same<Equals<ProcessCommand, string | { cmd: string; argv?: never } | { argv: readonly string[]; cmd?: never }>>()
same<Equals<WaitResult,
  | { reason: 'exited'; exitCode: number; signal?: undefined; rawReason?: string }
  | { reason: 'signaled'; signal: string; exitCode?: undefined; rawReason?: string }
  | { reason: 'timed_out'; exitCode?: number; signal?: string; rawReason?: string }
  | { reason: 'lost' | 'failed'; exitCode?: number; signal?: string; rawReason?: string }
  | { reason: 'unknown'; exitCode?: number; signal?: string; rawReason: string }>>()
same<Equals<RunResult, WaitResult & { processId: string; output: string; stdout: string; stderr: string; logs: LogFrame[] }>>()
same<Equals<StreamLogEvent,
  | { type: 'log'; cursor?: string; frame: LogFrame }
  | { type: 'state'; cursor?: string; result: WaitResult }
  | { type: 'warning'; cursor?: string; message: string; firstAvailableCursor?: string }
  | { type: 'eof'; cursor?: string }
  | { type: 'error'; cursor?: string; error: Error }>>()
same<Equals<LogFrame, {
  cursor: string
  channel: 'stdout' | 'stderr' | 'pty' | 'setup' | string
  data: string
  encoding?: 'text' | 'base64' | string
  timestamp?: number
}>>()
same<Equals<TerminalSize, { cols: number; rows: number }>>()
same<Equals<SessionJSON, { sandboxId: string; sessionId: string }>>()
same<Equals<ProcessHandleJSON, { sandboxId: string; processId: string; kind?: ProcessKind }>>()
same<Equals<LogsOptions, { cursor?: string; limit?: number; encoding?: 'text' | 'base64' }>>()
same<Equals<StreamLogsOptions, { cursor?: string; limit?: number; encoding?: 'text' | 'base64'; signal?: AbortSignal }>>()
same<Equals<KillOptions, { signal?: ProcessSignal; escalateAfter?: number; escalateTo?: ProcessSignal }>>()
same<Equals<ProcessStartOptions, {
  cmd?: string; argv?: string[]; name?: string; cwd?: string; env?: Record<string, string>; user?: string
  shell?: string; login?: boolean; stdin?: 'closed' | 'open'; executionTimeout?: number; terminal?: TerminalSize
  keepLogs?: KeepLogs
}>>()
same<Equals<SessionStartOptions, { stdin?: 'closed' | 'open'; executionTimeout?: number; name?: string; keepLogs?: KeepLogs }>>()
same<Equals<LogsPage['items'], LogFrame[]>>()

// Fields of the core surface; the SDK adds optional ones (docs/behaviour.md 25-41),
// so these are checked field by field.
type Has<T, K extends keyof T, V> = Equals<T[K], V>
same<Has<ProcessDto, 'id', string>>()
same<Has<ProcessDto, 'name', string | undefined>>()
same<Has<ProcessDto, 'pid', number | undefined>>()
same<Has<ProcessDto, 'kind', ProcessReportedKind>>()
same<Has<ProcessDto, 'rawKind', string>>()
same<Has<ProcessDto, 'state', ProcessState>>()
same<Has<ProcessDto, 'rawState', string>>()
same<Has<ProcessDto, 'system', boolean>>()
same<Has<ProcessDto, 'sessionId', string | undefined>>()
same<Has<ProcessDto, 'argv', string[] | undefined>>()
same<Has<ProcessDto, 'shellCommand', string | undefined>>()
same<Has<ProcessDto, 'code', string | undefined>>()
same<Has<ProcessDto, 'language', string | undefined>>()
same<Has<ProcessDto, 'shell', string | undefined>>()
same<Has<ProcessDto, 'resolvedShell', string | undefined>>()
same<Has<ProcessDto, 'login', boolean | undefined>>()
same<Has<ProcessDto, 'cwd', string | undefined>>()
same<Has<ProcessDto, 'user', string | undefined>>()
same<Has<ProcessDto, 'stdin', ProcessStdinMode | undefined>>()
same<Has<ProcessDto, 'rawStdin', string | undefined>>()
same<Has<ProcessDto, 'executionTimeout', number | undefined>>()
same<Has<ProcessDto, 'terminal', TerminalSize | undefined>>()
same<Has<ProcessDto, 'keepLogs', ProcessKeepLogs | undefined>>()
same<Has<ProcessDto, 'rawKeepLogs', string | undefined>>()
same<Has<ProcessDto, 'exitCode', number | undefined>>()
same<Has<ProcessDto, 'signal', string | undefined>>()
same<Has<ProcessDto, 'reason', ProcessReason | undefined>>()
same<Has<ProcessDto, 'rawReason', string | undefined>>()
same<Has<ProcessDto, 'createdAt', string | undefined>>()
same<Has<ProcessDto, 'startedAt', string | undefined>>()
same<Has<ProcessDto, 'exitedAt', string | undefined>>()
same<Has<ProcessDto, 'truncatedHead', boolean | undefined>>()
same<Has<ProcessDto, 'firstAvailableCursor', string | undefined>>()
same<Has<ProcessDto, 'lastCursor', string | undefined>>()
same<Has<LogsPage, 'truncatedHead', boolean | undefined>>()
same<Has<LogsPage, 'firstAvailableCursor', string | undefined>>()
same<Has<ListResult<ProcessDto>, 'items', ProcessDto[]>>()
same<Has<CreateSessionOptions, 'cwd', string | undefined>>()
same<Has<CreateSessionOptions, 'env', Readonly<Record<string, string>> | undefined>>()
same<Has<CreateSessionOptions, 'shell', string | undefined>>()
same<Has<CreateSessionOptions, 'login', boolean | undefined>>()
same<Has<CreateSessionOptions, 'name', string | undefined>>()
same<Has<SessionRunOptions, 'stdin', 'closed' | 'open' | undefined>>()
same<Has<SessionRunOptions, 'executionTimeout', number | undefined>>()
same<Has<SessionRunOptions, 'name', string | undefined>>()
same<Has<SessionRunOptions, 'keepLogs', KeepLogs | undefined>>()
same<Has<SessionRunOptions, 'timeout', number | undefined>>()
same<Has<ProcessListOptions, 'state', 'running' | 'terminal' | 'all' | undefined>>()
same<Has<ProcessListOptions, 'kind', ProcessKind | undefined>>()
same<Has<ProcessListOptions, 'sessionId', string | undefined>>()
same<Has<ProcessListOptions, 'name', string | undefined>>()
same<Has<ProcessListOptions, 'pid', number | undefined>>()
same<Has<RunOptions, 'timeout', number | undefined>>()
same<Has<RunOptions, 'kind', 'exec' | undefined>>()
same<Has<RunOptions, 'cmd', string | undefined>>()
same<Has<WaitProcessOptions, 'timeout', number | undefined>>()

// Classes: constructors, properties and methods with the core surface's signatures.
type PtyOptions = Omit<ProcessStartOptions, 'cmd'> & { terminal?: TerminalSize }
same<Equals<ConstructorParameters<typeof ProcessHandle>, [transport: HttpTransport, sandboxId: string, processId: string, kind?: ProcessKind]>>()
same<Equals<ConstructorParameters<typeof ProcessService>, [transport: HttpTransport, sandboxId: string]>>()
same<Equals<ConstructorParameters<typeof PtyService>, [process: ProcessService]>>()
same<Equals<ConstructorParameters<typeof Session>, [binding: ProcessBinding, id: string]>>()
same<Has<ProcessHandle, 'id', string>>()
same<Has<ProcessHandle, 'sandboxId', string>>()
same<Has<ProcessHandle, 'kind', ProcessKind | undefined>>()
same<Has<ProcessHandle, 'attach', () => Promise<PtyDuplex>>>()
same<Has<ProcessHandle, 'delete', () => Promise<void>>>()
same<Has<ProcessHandle, 'get', () => Promise<ProcessDto>>>()
same<Has<ProcessHandle, 'kill', (options?: KillOptions) => Promise<void>>>()
same<Has<ProcessHandle, 'logs', (options?: LogsOptions) => Promise<LogsPage>>>()
same<Has<ProcessHandle, 'resize', (cols: number, rows: number) => Promise<void>>>()
same<Has<ProcessHandle, 'stdin', (data: string | Uint8Array, options?: { eof?: boolean }) => Promise<void>>>()
same<Has<ProcessHandle, 'stdinEof', () => Promise<void>>>()
same<Has<ProcessHandle, 'streamLogs', (options?: StreamLogsOptions) => AsyncIterable<StreamLogEvent>>>()
same<Has<ProcessHandle, 'toJSON', () => ProcessHandleJSON>>()
same<Has<ProcessHandle, 'wait', (options?: WaitProcessOptions) => Promise<WaitResult>>>()
same<Has<ProcessService, 'connect', (idOrHandle: string | ProcessHandleJSON) => ProcessHandle>>()
same<Has<ProcessService, 'connectSession', (sessionIdOrJSON: string | SessionJSON) => Session>>()
same<Has<ProcessService, 'createSession', (options?: CreateSessionOptions) => Promise<Session>>>()
same<Has<ProcessService, 'get', (id: string) => Promise<ProcessDto>>>()
same<Has<ProcessService, 'list', (options?: ProcessListOptions) => Promise<ListResult<ProcessDto>>>>()
same<Has<ProcessService, 'run', (command: ProcessCommand, options?: RunOptions) => Promise<RunResult>>>()
same<Has<ProcessService, 'start', (command: ProcessCommand, options?: ProcessStartOptions) => Promise<ProcessHandle>>>()
same<Has<PtyService, 'attach', (command?: string, options?: PtyOptions) => Promise<{ handle: ProcessHandle; connection: PtyDuplex }>>>()
same<Has<PtyService, 'connect', (idOrHandle: string | ProcessHandleJSON) => ProcessHandle>>()
same<Has<PtyService, 'delete', (idOrHandle: string | ProcessHandleJSON) => Promise<void>>>()
same<Has<PtyService, 'list', () => Promise<ListResult<ProcessDto>>>>()
same<Has<PtyService, 'start', (command?: string, options?: PtyOptions) => Promise<ProcessHandle>>>()
same<Has<Session, 'sandboxId', string>>()
same<Has<Session, 'id', string>>()
same<Has<Session, typeof Symbol.asyncDispose, () => Promise<void>>>()
same<Has<Session, 'delete', () => Promise<void>>>()
same<Has<Session, 'get', () => Promise<ProcessDto>>>()
same<Has<Session, 'run', (command: string, options?: SessionRunOptions) => Promise<RunResult>>>()
same<Has<Session, 'start', (command: string, options?: SessionStartOptions) => Promise<ProcessHandle>>>()
same<Has<Session, 'toJSON', () => SessionJSON>>()
same<Has<PtyDuplex, 'readable', AsyncIterable<Uint8Array>>>()
same<Has<PtyDuplex, 'write', (data: string | Uint8Array) => void>>()
same<Has<PtyDuplex, 'close', () => void>>()

// And used as a caller would, narrowing the unions.
export async function use(p: ProcessService, pty: PtyService): Promise<number> {
  const r = await p.run({ argv: ['true'] }, { timeout: 0, kind: 'exec', keepLogs: 'none', stdin: 'closed' })
  let n = 0
  switch (r.reason) {
    case 'exited': n = r.exitCode; break
    case 'signaled': n = r.signal.length; break
    case 'unknown': n = r.rawReason.length; break
  }
  await using s = await p.createSession({ shell: 'dash', env: { A: 'b' }, login: false })
  const h = await s.start('cat', { stdin: 'open', keepLogs: 'on_exit_ttl', executionTimeout: 1 })
  for await (const ev of h.streamLogs({ signal: AbortSignal.timeout(1) })) {
    if (ev.type === 'log') n += ev.frame.data.length
    else if (ev.type === 'state') n += ev.result.reason.length
    else if (ev.type === 'warning') n += ev.message.length
    else if (ev.type === 'error') n += ev.error.message.length
  }
  await h.kill({ signal: 'HUP', escalateAfter: 1, escalateTo: 'QUIT' })
  const { connection } = await pty.attach(undefined, { terminal: { cols: 80, rows: 24 } })
  for await (const b of connection.readable) n += b.length
  return n
}
