// One error class per API error code, all ConchError; errorFrom is the one
// place where an answer becomes one of them.

/**
 * An error the daemon answered: its code, HTTP status and message; or, with
 * status 0, a call the daemon did not answer in time (DeadlineExceededError).
 */
export class ConchError extends Error {
  readonly code: string
  readonly status: number
  /** Seconds to wait before trying again, when the answer said (`Retry-After`). */
  retryAfter?: number

  constructor(code: string, status: number, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'ConchError'
    this.code = code
    this.status = status
  }
}

/** 400: malformed input, a bad option value, a shell that is not POSIX. */
export class InvalidArgumentError extends ConchError {
  constructor(message: string, status = 400) {
    super('invalid_argument', status, message)
    this.name = 'InvalidArgumentError'
  }
}

/** 401: missing or wrong token. */
export class AuthenticationError extends ConchError {
  constructor(message: string, status = 401) {
    super('unauthenticated', status, message)
    this.name = 'AuthenticationError'
  }
}

/** 403: the request's Host or Origin is not allowed. */
export class PermissionDeniedError extends ConchError {
  constructor(message: string, status = 403) {
    super('permission_denied', status, message)
    this.name = 'PermissionDeniedError'
  }
}

/** 404: no such process or session. */
export class NotFoundError extends ConchError {
  constructor(message: string, status = 404) {
    super('not_found', status, message)
    this.name = 'NotFoundError'
  }
}

/** 409: the operation does not apply in the process's state. */
export class UnsupportedOperationError extends ConchError {
  constructor(message: string, status = 409) {
    super('unsupported_operation', status, message)
    this.name = 'UnsupportedOperationError'
  }
}

/**
 * 409 stdin_full: a stdin write (or interact input) that did not fit in the
 * process's input queue. Its first `acceptedBytes` bytes were queued; send
 * the rest again once the process has read.
 */
export class StdinFullError extends ConchError {
  readonly acceptedBytes: number

  constructor(message: string, status = 409, acceptedBytes = 0) {
    super('stdin_full', status, message)
    this.name = 'StdinFullError'
    this.acceptedBytes = acceptedBytes
  }
}

/**
 * 409 already_exists: a session created with `uniqueName` whose name a
 * running session has; `sessionId` is that session (use it, with
 * `process.connectSession(sessionId)`, rather than making another).
 */
export class AlreadyExistsError extends ConchError {
  readonly sessionId: string

  constructor(message: string, status = 409, sessionId = '') {
    super('already_exists', status, message)
    this.name = 'AlreadyExistsError'
    this.sessionId = sessionId
  }
}

/** 413: the request body is over the daemon's limit. */
export class PayloadTooLargeError extends ConchError {
  constructor(message: string, status = 413) {
    super('payload_too_large', status, message)
    this.name = 'PayloadTooLargeError'
  }
}

/** 429: over a configured limit of sessions or processes. */
export class ResourceExhaustedError extends ConchError {
  constructor(message: string, status = 429) {
    super('resource_exhausted', status, message)
    this.name = 'ResourceExhaustedError'
  }
}

/**
 * 503 draining: new work (a process, session, command or cell) while the
 * daemon drains before it stops; `retryAfter` says when to try again (a
 * daemon that replaces it may take it).
 */
export class DrainingError extends ConchError {
  constructor(message: string, status = 503) {
    super('draining', status, message)
    this.name = 'DrainingError'
  }
}

/** 500: a bug in the daemon. */
export class InternalError extends ConchError {
  constructor(message: string, status = 500) {
    super('internal', status, message)
    this.name = 'InternalError'
  }
}

/**
 * No answer in time: the daemon did not answer a call with a timeout or a
 * wait window within it and a margin, or another call within the
 * transport's requestTimeout (a daemon that hangs, a network that holds the
 * request). `status` is 0: nothing was answered.
 */
export class DeadlineExceededError extends ConchError {
  constructor(message: string, options?: ErrorOptions) {
    super('deadline_exceeded', 0, message, options)
    this.name = 'DeadlineExceededError'
  }
}

/**
 * An answer that is not the API's: an error status whose body is not the
 * API's error (a proxy's 502 or 504 page, another server's 404), or a 2xx
 * whose body is not JSON, or JSON of another shape than the route answers.
 * `status` is the answer's HTTP status; 0 only for a redirect whose status
 * a browser's fetch hides.
 */
export class UnexpectedResponseError extends ConchError {
  constructor(message: string, status: number) {
    super('unexpected_response', status, message)
    this.name = 'UnexpectedResponseError'
  }
}

type ErrorClass = new (message: string, status?: number) => ConchError

const byCode: Record<string, ErrorClass> = {
  invalid_argument: InvalidArgumentError,
  unauthenticated: AuthenticationError,
  permission_denied: PermissionDeniedError,
  not_found: NotFoundError,
  unsupported_operation: UnsupportedOperationError,
  stdin_full: StdinFullError,
  already_exists: AlreadyExistsError,
  payload_too_large: PayloadTooLargeError,
  resource_exhausted: ResourceExhaustedError,
  draining: DrainingError,
  internal: InternalError,
}

// An error answer with no body at all is named by its status.
const codeByStatus: Record<number, string> = {
  400: 'invalid_argument',
  401: 'unauthenticated',
  403: 'permission_denied',
  404: 'not_found',
  409: 'unsupported_operation',
  413: 'payload_too_large',
  429: 'resource_exhausted',
  500: 'internal',
  503: 'draining', // the Python SDK's UnavailableError
}

/**
 * The error of an answer with a status that is not 2xx, from its body's text
 * and its Retry-After header (null when it has none). The daemon answers
 * every refusal in the API's error shape (docs/api.md): an error in it is
 * named by its code; a body that is not in it (a proxy's 502 or 504 page,
 * another server's 404) is UnexpectedResponseError, whatever its status. An
 * answer with no body is named by its status, when the API uses it (as the
 * Python SDK does: a refused WebSocket handshake may keep only its status).
 */
export function errorFrom(status: number, text: string, retryAfter: string | null = null): ConchError {
  let code: string | undefined
  let message = text.trim()
  let accepted = 0
  let sessionId = ''
  try {
    const body: unknown = JSON.parse(text)
    if (isRecord(body) && isRecord(body.error)) {
      if (typeof body.error.code === 'string') code = body.error.code
      if (typeof body.error.message === 'string') message = body.error.message
      if (typeof body.error.acceptedBytes === 'number') accepted = body.error.acceptedBytes
      if (typeof body.error.sessionId === 'string') sessionId = body.error.sessionId
    }
  } catch {
    // not JSON: not the API's error
  }
  if (code === undefined && message === '') code = codeByStatus[status]
  if (code === undefined) {
    const err = new UnexpectedResponseError(`conch: an answer that is not the API's (HTTP ${status}): ${message.slice(0, 200) || 'no body'}`, status)
    return withRetryAfter(err, retryAfter)
  }
  message ||= `HTTP ${status}`
  const cls = byCode[code]
  const err = cls === StdinFullError ? new StdinFullError(message, status, accepted)
    : cls === AlreadyExistsError ? new AlreadyExistsError(message, status, sessionId)
      : cls ? new cls(message, status) : new ConchError(code, status, message)
  return withRetryAfter(err, retryAfter)
}

/** err with the seconds of its answer's Retry-After header, when it had one. */
function withRetryAfter(err: ConchError, retryAfter: string | null): ConchError {
  const after = retrySeconds(retryAfter)
  if (after !== undefined) err.retryAfter = after
  return err
}

/** The seconds of a Retry-After header: a number of seconds, or an HTTP date. */
function retrySeconds(v: string | null): number | undefined {
  if (v === null || v.trim() === '') return undefined
  if (/^\s*\d+\s*$/.test(v)) return Number(v)
  const at = Date.parse(v)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000))
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
