// The types of the SDK's core surface, whose names and types stay stable,
// and those of commands that come back and code contexts (docs/behaviour.md
// promises 25-41), marked where they are.

/** What a process is: a one-shot exec, a PTY, a code cell, or a session's shell or command. */
export type ProcessKind = 'exec' | 'pty' | 'code' | 'session'

/** A kind as a daemon reported it; one this SDK does not know is `'unknown'` (see `rawKind`). */
export type ProcessReportedKind = ProcessKind | 'unknown'

export type ProcessState = 'starting' | 'provisioning' | 'running' | 'terminal' | 'unknown'

export type ProcessSignal = 'TERM' | 'KILL' | 'INT' | 'HUP' | 'QUIT' | 'USR1' | 'USR2'

export type ProcessReason = 'exited' | 'signaled' | 'timed_out' | 'lost' | 'failed' | 'unknown'

export type KeepLogs = 'until_cleanup' | 'on_exit_ttl' | 'none'

export type ProcessKeepLogs = KeepLogs | 'unknown'

export type ProcessStdinMode = 'closed' | 'open' | 'unknown'

/** A terminal's size in character cells. */
export interface TerminalSize {
  cols: number
  rows: number
}

export interface ProcessDto {
  id: string
  name?: string
  pid?: number
  kind: ProcessReportedKind
  rawKind: string
  state: ProcessState
  rawState: string
  system: boolean
  sessionId?: string
  argv?: string[]
  shellCommand?: string
  code?: string
  language?: string
  shell?: string
  resolvedShell?: string
  login?: boolean
  cwd?: string
  user?: string
  stdin?: ProcessStdinMode
  rawStdin?: string
  /** Server-managed process deadline in milliseconds. */
  executionTimeout?: number
  terminal?: TerminalSize
  keepLogs?: ProcessKeepLogs
  rawKeepLogs?: string
  exitCode?: number
  signal?: string
  reason?: ProcessReason
  rawReason?: string
  createdAt?: string
  startedAt?: string
  exitedAt?: string
  truncatedHead?: boolean
  firstAvailableCursor?: string
  lastCursor?: string
  /** Why a `failed` process never ran (docs/api.md). */
  error?: string
  /** A session's leased loopback ports (docs/api.md). */
  ports?: number[]
  /** The process waits for input (docs/behaviour.md promise 31). */
  waitingForInput?: boolean
  /** Time of its last frame (docs/behaviour.md promise 31). */
  lastOutputAt?: string
  /**
   * For `signaled`: it caught the signal the daemon sent and exited with a
   * status of its own, `exitCode`, rather than being ended by it.
   */
  handled?: boolean
  /** The number of elements of the whole argv, of which `argv` holds the first within 64 KiB. */
  argvCount?: number
  /** `argv` holds fewer elements than the process was started with (`argvCount`). */
  argvTruncated?: boolean
  /** The OOM killer ended it at its cgroup's memory limit. */
  oomKilled?: boolean
  /** What the ended process cost. */
  usage?: Usage
  /**
   * The limits that bound a session's, code context's, exec or PTY process's cgroup: those it was
   * created with, the daemon's defaults for the fields it left unset (absent: none applies).
   */
  limits?: Limits
}

/**
 * Bounds of a process's, session's or code context's cgroup: it and
 * everything it starts, together. A limit the daemon's host cannot apply is
 * refused (400 `unsupported_operation`).
 */
export interface Limits {
  /** Memory in bytes, without swap; past it the OOM killer ends a process. */
  memoryBytes?: number
  /** Processes and threads at once; a fork past it fails. */
  pids?: number
  /** CPU time per second of wall time: 1000 is one core. */
  cpuMillis?: number
}

/**
 * What the daemon adds to an ended process's WaitResult and RunResult (the
 * unions themselves stay as they are): read them as `WaitResult & ResourceReport`.
 */
export interface ResourceReport {
  /** The OOM killer ended it at its cgroup's memory limit. */
  oomKilled?: boolean
  /** What it cost. */
  usage?: Usage
}

/**
 * How a `signaled` process took the signal, beside its WaitResult and
 * RunResult (whose `signaled` member carries no `exitCode`): read them as
 * `WaitResult & SignalReport`.
 */
export interface SignalReport {
  /**
   * The exec or PTY process caught the signal the daemon sent and exited
   * with a status of its own, `signaledExitCode` (a trap's `exit 15`),
   * rather than being ended by it.
   */
  handled?: boolean
  /** The exit status the daemon gave with the signal: 128 plus its number, or the process's own when `handled`. */
  signaledExitCode?: number
}

/** What an ended process, command or cell cost. */
export interface Usage {
  /** User plus system CPU time in milliseconds. */
  cpuMs: number
  /** The most memory it held at once; absent where the daemon has no cgroups. */
  memoryPeakBytes?: number
}

/**
 * How a process ended. `timed_out` is a process or command its
 * `executionTimeout` stopped (`rawReason: 'timed_out'`), with the `exitCode`
 * and `signal` the daemon reports for it, or a wait the caller's `timeout`
 * ended first (`rawReason: 'wait_timeout'`, neither: the process goes on).
 */
export type WaitResult =
  | { reason: 'exited'; exitCode: number; signal?: undefined; rawReason?: string }
  | { reason: 'signaled'; signal: string; exitCode?: undefined; rawReason?: string }
  | { reason: 'timed_out'; exitCode?: number; signal?: string; rawReason?: string }
  | { reason: 'lost' | 'failed'; exitCode?: number; signal?: string; rawReason?: string }
  | { reason: 'unknown'; exitCode?: number; signal?: string; rawReason: string }

export interface ProcessStartOptions {
  cmd?: string
  argv?: string[]
  name?: string
  cwd?: string
  env?: Record<string, string>
  user?: string
  shell?: string
  login?: boolean
  stdin?: 'closed' | 'open'
  /** Server-managed process deadline in milliseconds. */
  executionTimeout?: number
  terminal?: TerminalSize
  keepLogs?: KeepLogs
}

/**
 * What to execute: a shell command string, or an object naming exactly one of
 * `cmd` (shell) or `argv` (no shell: the safe form for untrusted arguments).
 */
export type ProcessCommand = string | { cmd: string; argv?: never } | { argv: readonly string[]; cmd?: never }

/**
 * How a run answers an agent (docs/behaviour.md promises 25, 28, 29). The daemon
 * refuses them (InvalidArgumentError) until it has them.
 */
export interface AgentAnswerOptions {
  /**
   * Come back once the command has been quiet this many milliseconds: `run`
   * then resolves with the output so far and the process running (`isRunning`).
   */
  idleTimeout?: number
  /**
   * Bytes of output one answer holds. Asked for, the result keeps the daemon's
   * head and tail and says what it left out (`omittedBytes`, `omittedAfter`);
   * not asked, `run` pages the rest back in from the logs.
   */
  outputLimit?: number
  /** Text fields without escape sequences, overwrites applied. */
  plain?: boolean
}

export type RunOptions = Omit<ProcessStartOptions, 'kind'> & {
  /** Caller wait budget in milliseconds; `0` waits unbounded. */
  timeout?: number
  /**
   * Aborts the wait: the run rejects with the signal's reason, and the
   * process is left running, as when `timeout` runs out.
   */
  signal?: AbortSignal
  /** Bounds of the process's cgroup. */
  limits?: Limits
  /** `run()` only creates exec processes; PTYs come from `sandbox.pty.start()` / `attach()`. */
  kind?: 'exec'
} & AgentAnswerOptions

export interface LogFrame {
  cursor: string
  channel: 'stdout' | 'stderr' | 'pty' | 'setup' | string
  data: string
  encoding?: 'text' | 'base64' | string
  timestamp?: number
}

export type RunResult = WaitResult & {
  processId: string
  output: string
  stdout: string
  stderr: string
  logs: LogFrame[]
}

/**
 * What a run's result carries beside the core RunResult (docs/behaviour.md
 * promises 25 and 28; a session command's or cell's `cwd`, docs/api.md). `run` resolves with a RunResult; `runDetails(r)` gives
 * these fields their types, `isRunning(r)` tells a run that came back early.
 */
export interface RunDetails {
  /** `'running'`: the run came back before the process ended; `'terminal'`: it ended. */
  state: 'running' | 'terminal'
  /** The process waits for input (a run that came back early because of it). */
  waitingForInput?: boolean
  /**
   * The cursor of the result's last frame, or of where the output stood when
   * it has none (`'0'` before any output): `interact({ cursor: next })` reads
   * on from it.
   */
  next?: string
  /** Retention dropped the head of the output. */
  truncated?: boolean
  /** Bytes an answer under `outputLimit` left out, after the frame `omittedAfter`. */
  omittedBytes?: number
  omittedAfter?: string
  /** How many of `logs` make the head of an answer that left bytes out (absent: none). */
  headFrames?: number
  /** A session command's: the directory it left its shell in. */
  cwd?: string
}

/** A run that came back before its process ended: `reason: 'timed_out'`, the process still running. */
export type RunningRun = RunResult & RunDetails & {
  state: 'running'
  reason: 'timed_out'
  /** `'idle_timeout'`, `'waiting_for_input'` or `'wait_timeout'` (the caller's `timeout`). */
  rawReason: string
  waitingForInput: boolean
}

/** One page of a listing; `next` is where the following page starts, absent on the last. */
export interface ListResult<T> {
  items: T[]
  next?: string
}

export interface LogsPage extends ListResult<LogFrame> {
  truncatedHead?: boolean
  firstAvailableCursor?: string
}

export type StreamLogEvent =
  | { type: 'log'; cursor?: string; frame: LogFrame }
  | { type: 'state'; cursor?: string; result: WaitResult }
  | { type: 'warning'; cursor?: string; message: string; firstAvailableCursor?: string }
  | { type: 'eof'; cursor?: string }
  | { type: 'error'; cursor?: string; error: Error }

export interface LogsOptions {
  cursor?: string
  limit?: number
  encoding?: 'text' | 'base64'
}

export interface StreamLogsOptions {
  cursor?: string
  /**
   * Yield at most this many `log` events, then end; 0 or none is no bound. One that is not a
   * non-negative integer yields one `error` event (InvalidArgumentError), as logs is refused.
   */
  limit?: number
  encoding?: 'text' | 'base64'
  signal?: AbortSignal
}

export interface KillOptions {
  signal?: ProcessSignal
  escalateAfter?: number
  escalateTo?: ProcessSignal
}

export interface ProcessListOptions {
  state?: 'running' | 'terminal' | 'all'
  kind?: ProcessKind
  sessionId?: string
  name?: string
  pid?: number
  /** Where the page starts: a previous page's `next`. */
  cursor?: string
  /** Processes per page (the daemon's default is 100). */
  limit?: number
}

export interface WaitProcessOptions {
  /** Caller wait budget in milliseconds; omitted or 0 waits until the process ends. */
  timeout?: number
  signal?: AbortSignal
}

/** Settings for the persistent shell, inherited by every command. */
export interface CreateSessionOptions {
  cwd?: string
  env?: Readonly<Record<string, string>>
  /**
   * A POSIX shell (bash, sh, dash, zsh, ksh) on Linux and macOS; another
   * shell is refused when the session is created.
   */
  shell?: string
  login?: boolean
  name?: string
  /**
   * Makes `name` the session's own while it runs: a running session of that
   * name refuses the creation with AlreadyExistsError, whose `sessionId` is
   * that session, and of creations of one name at once only the first makes
   * one (a create-if-absent across clients).
   */
  uniqueName?: boolean
  /** An interpreter (`python`, `javascript`) instead of a shell: a code context (docs/behaviour.md 34). */
  language?: string
  /** Bounds of the session's cgroup: its shell or interpreter and everything its commands start. */
  limits?: Limits
}

export interface SessionStartOptions {
  stdin?: 'closed' | 'open'
  /**
   * Server-side command deadline in milliseconds. The clock starts when the
   * command starts, after any queued commands ahead of it.
   */
  executionTimeout?: number
  name?: string
  keepLogs?: KeepLogs
}

export interface SessionRunOptions extends SessionStartOptions, AgentAnswerOptions {
  /** Caller wait budget in milliseconds; omitted or 0 waits unbounded. */
  timeout?: number
  /**
   * Aborts the wait: the run rejects with the signal's reason, and the
   * command is left running, as when `timeout` runs out (interrupt it with
   * the handle's `kill({ signal: 'INT' })`).
   */
  signal?: AbortSignal
}

export interface SessionJSON {
  sandboxId: string
  sessionId: string
}

export interface ProcessHandleJSON {
  sandboxId: string
  processId: string
  kind?: ProcessKind
}

// Answering a running process, and readiness (docs/behaviour.md promises 27, 30).
// The daemon refuses them until it has them.

export interface InteractOptions extends AgentAnswerOptions {
  /** Text written to stdin or the terminal first. */
  input?: string | Uint8Array
  /** Close stdin after the input. */
  eof?: boolean
  /** A signal sent before waiting. */
  signal?: ProcessSignal
  /** Return output after this cursor; absent: output after this call's input. */
  cursor?: string
  /** How long the daemon waits (ms) before it answers with what it has. */
  timeout?: number
}

/** The answer of a process still running: the output so far. */
export interface RunningResult {
  running: true
  processId: string
  output: string
  stdout: string
  stderr: string
  logs: LogFrame[]
  /** The cursor after the last frame of the answer. */
  next?: string
  waitingForInput: boolean
  omittedBytes?: number
  omittedAfter?: string
  /** The process, as the daemon described it. */
  process: ProcessDto
}

/** The answer of a process that ended: its RunResult, with where its output stopped. */
export type EndedResult = RunResult & {
  running: false
  next?: string
  omittedBytes?: number
  omittedAfter?: string
}

export type InteractResult = EndedResult | RunningResult

export interface ReadyOptions {
  /** A TCP port the process or a descendant listens on; 'any' for the first it opens. */
  port?: number | 'any'
  /** An RE2 expression matched against its output. */
  pattern?: string
  /** Caller wait budget in milliseconds; omitted or 0 waits until ready or ended. */
  timeout?: number
  /** Aborts the wait: `ready` rejects with the signal's reason, and the process goes on. */
  signal?: AbortSignal
}

export type ReadyResult =
  | { ready: true; port?: number; match?: string; cursor?: string }
  /**
   * `truncated`: retention or the log budget dropped output the pattern
   * was to be matched against before the wait read it: it may have been there.
   */
  | { ready: false; result: WaitResult; truncated?: boolean }

/** A cell of a code context, options as for a session command (docs/behaviour.md 35). */
export type CodeRunOptions = SessionRunOptions
export type CodeStartOptions = SessionStartOptions
