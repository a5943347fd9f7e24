// `pykernel/testing`: a stand-in kernel, scripted in JavaScript, for a host's own tests.
// It is a launcher (`kernel: { launcher: fake.launcher }`): every kernel goes through the
// pool's real code, so what a pool guarantees holds for it as for a Python kernel.

/** A request the host sent to a stand-in kernel: what `onExecute` is given. */
export interface StandInCell {
  /** The request's id on the wire. */
  readonly id: string
  /** 0 for this kernel's first request, 1 for the next... */
  readonly index: number
  readonly code: string
  /** The request's own cwd, when it named one. */
  readonly cwd: string | null
  /** The request's own variables (`null` unsets one), when it named any. */
  readonly env: Record<string, string | null> | null
  readonly silent: boolean
  readonly storeHistory: boolean
  /** Aborted when the host interrupts the cell (a timeout, an abort, a disposal), unless
   *  the kernel ignores interrupts. The cell has then ended: later output is dropped. */
  readonly signal: AbortSignal
  readonly interrupted: boolean
  /** `done` was sent. */
  readonly done: boolean
}

/** How a stand-in's process ended. `reason`: `'exit'` (the host's `exit`), `'stdin closed'`
 *  (its link closed), `'SIGTERM'`/`'SIGKILL'` (the host's in-band signal), `'die'`
 *  (its script), `'start failed'` (`onStart` threw), `'killed'` (nothing the script
 *  decided: the host killed its process, cutting the link, or the fake was closed). */
export interface StandInExit {
  code: number | null
  signal: string | null
  reason: 'exit' | 'stdin closed' | 'SIGTERM' | 'SIGKILL' | 'die' | 'start failed' | 'killed'
}

/** What a stand-in may be told to ignore. */
export interface StandInIgnore {
  /** `exit`, `stdinEnd`, `sigterm` and `sigkill` at once: a kernel whose shutdown the pool
   *  cannot confirm within its grace. The host still kills the process when it cuts the
   *  link (1 s after it asks for SIGKILL): nothing outlives that. */
  shutdown?: boolean
  /** The host's interrupts (a timeout's, an abort's): the cell runs on. */
  interrupts?: boolean
  /** The `exit` frame of a shutdown. */
  exit?: boolean
  /** Its stdin closing (otherwise it ends, as a launched kernel whose link closed). */
  stdinEnd?: boolean
  sigterm?: boolean
  sigkill?: boolean
  /** The heartbeat's pings: an idle kernel that seems wedged. */
  pings?: boolean
  /** The link's heartbeats: a link that seems dead (`linkTimeoutMs`). */
  heartbeats?: boolean
}

/** One stand-in kernel process, as its script drives it. */
export interface StandInKernel {
  /** 1 for the first kernel the fake started, 2 for the next... */
  readonly ordinal: number
  /** Its process id on this machine (the pool's `pid` for the session). */
  readonly pid: number
  /** The words the host appended to the launcher (`python3 -u -c <bootstrap> ...`). */
  readonly argv: string[]
  /** The last `init` the host sent (`cwd`, `env`, ...); null before the first. */
  readonly init: { cwd: string; env: Record<string, string>; [key: string]: unknown } | null
  readonly inits: number
  /** Every request the host sent, in order. */
  readonly cells: StandInCell[]
  readonly interrupts: number
  /** The in-band signals the host sent, by name. */
  readonly signals: string[]
  /** `exit` frames received: shutdowns the host asked for. */
  readonly exitRequests: number
  readonly pings: number
  readonly executionCount: number
  readonly alive: boolean
  /** A cell is running. */
  readonly busy: boolean
  /** How it ended, once it has (and the host has reaped it). */
  readonly exit: StandInExit | null
  /** Resolves once it has ended and the host has reaped it. */
  readonly ended: Promise<StandInExit>
  /** Settles when `onStart` has. */
  readonly started: Promise<unknown> | null
  /** Resolves with the running cell once one runs (at once if one does). Rejects with
   *  `code: 'ERR_STAND_IN_WAIT'` when the kernel ends first, or after `timeoutMs`
   *  (default 10 000) without a cell. */
  untilBusy(options?: { timeoutMs?: number }): Promise<StandInCell>
  ignore(what: StandInIgnore): this
  /** To the running cell (dropped when none runs). */
  stdout(text: string): void
  stderr(text: string): void
  display(bundle: Record<string, unknown>, options?: { displayId?: string; update?: boolean }): void
  clear(wait?: boolean): void
  /** The cell's value: a string is its `text/plain`, an object a MIME bundle. */
  result(value: string | Record<string, unknown>): void
  /** Fails the running cell with a Python exception; it ends when the script returns. */
  error(ename: string, evalue: string, traceback?: string[]): void
  /** A bridge call from the running cell, answered by the host's `onCall`. */
  call(name: string, args?: unknown): Promise<unknown>
  /** Ends the process now: an exit code (default 1) or a signal (`'SIGKILL'`, `'SIGSEGV'`),
   *  and text for its stderr. A running cell's request fails as when Python dies. */
  die(how?: { code?: number; signal?: string; stderr?: string }): Promise<StandInExit>
  /** Closes its stdin and runs on: the host's next write to it fails, as to a kernel
   *  that is ending before the host has seen it end. Resolves once it is closed. */
  closeInput(): Promise<void>
  /** Closes its protocol output and runs on: a kernel that stopped talking. */
  silence(): void
}

export interface StandInScript {
  /** Each process, once it has connected, before it answers `init`: await to delay the
   *  start, throw to fail it (`ERR_KERNEL_START_FAILED` with the message), or call
   *  `kernel.ignore(...)`. */
  onStart?: (kernel: StandInKernel) => unknown
  /** Each request: its output through `kernel`, its value returned (a string is
   *  `text/plain`, an object a MIME bundle), a throw is its exception (`ename` from the
   *  error's `ename` or `name`). Await anything to block. Without it a cell prints nothing. */
  onExecute?: (cell: StandInCell, kernel: StandInKernel) => unknown
}

export interface StandInFake extends StandInScript {
  /** The argv prefix: `kernel: { launcher }` of a pool or a `Kernel.start`, or a request's. */
  readonly launcher: string[]
  /** Every process started, in order. */
  readonly kernels: StandInKernel[]
  /** How many processes have started. */
  readonly starts: number
  /** The processes still running. */
  readonly running: StandInKernel[]
  /** `exit` frames over every kernel. */
  readonly exitRequests: number
  /** Messages from a stand-in process that could not be read; each such process was
   *  cut off, and its kernel ends as one whose link was lost. */
  readonly errors: Error[]
  /** The `n`-th kernel (from 1), once it has started. Rejects with
   *  `code: 'ERR_STAND_IN_WAIT'` after `timeoutMs` (default 10 000), or when `close()`
   *  comes first. */
  kernel(n: number, options?: { timeoutMs?: number }): Promise<StandInKernel>
  /** Ends every stand-in and removes the controller's private directory. */
  close(): Promise<void>
}

/** Starts the controller: a Unix socket in a private (0700) directory, which each
 *  stand-in process connects back to. */
export function createStandInKernel(script?: StandInScript): Promise<StandInFake>

/** A promise that a test settles: `await gate.promise` in a cell, `gate.release()` later. */
export function latch<T = void>(): { promise: Promise<T>; release: (value: T) => void }

/** An exception for a cell to throw: `throw pythonError('ValueError', 'boom')`. */
export function pythonError(ename: string, evalue: string, traceback?: string[]): Error & { ename: string; traceback: string[] }
