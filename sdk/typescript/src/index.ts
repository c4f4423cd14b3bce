export { Sandbox, type SandboxOptions } from './sandbox.js'
export { ProcessService, PtyService, type ProcessBinding } from './service.js'
export { ProcessHandle } from './handle.js'
export { Session } from './session.js'
export { PtyDuplex, PtyGapError, PtyInputFullError, type PtyGap } from './duplex.js'
export {
  HttpTransport, type HttpTransportOptions, type WebSocketConstructor, type WebSocketLike, type WebSocketEventLike,
} from './transport.js'
export {
  ConchError, InvalidArgumentError, AuthenticationError, PermissionDeniedError, NotFoundError,
  UnsupportedOperationError, StdinFullError, AlreadyExistsError, PayloadTooLargeError, ResourceExhaustedError, DrainingError, InternalError,
  DeadlineExceededError, UnexpectedResponseError,
} from './errors.js'
export type * from './types.js'
export { isRunning, runDetails } from './details.js'
