// `pykernel/tool`: the eval tool as data (name, JSON Schema, description) and its handler.
import type { Chart, EvalResult, FitImagesOptions, KernelEvent, KernelPool, TruncationInfo } from './index'

/** One call's input, as `schema` describes it. */
export interface ToolInput {
  /** Run in order in one session; the first failure stops the rest. */
  cells: ToolCell[]
  /** The persistent process to use. @default "default" */
  session?: string
  /** Seconds per cell, clamped to 1..3600; 0 is no limit. @default the host's (30) */
  timeout?: number
  /** A fresh process before the first cell. */
  reset?: boolean
}

export interface ToolCell {
  code: string
  title?: string
  /** Seconds this cell may run (0: no limit); overrides the call's `timeout`. */
  timeout?: number
  /** A fresh process right before this cell. */
  reset?: boolean
}

/** What the host gives `handle` beside the model's input. */
export interface ToolContext {
  pool: KernelPool
  /**
   * The conversation: the model's sessions become `<sessionId>/<session>` (the default
   * session is `sessionId` itself), owned by it, so `pool.disposeOwner(sessionId)` ends
   * them all. Without it, the model's session name is the pool's session id.
   */
  sessionId?: string | undefined
  /** The owner of the sessions; default `sessionId`. */
  ownerId?: string | undefined
  cwd?: string | undefined
  interpreter?: string | undefined
  /** The timeout when the model gives none; 0 is no limit. @default 30 (the pool's) */
  timeoutSeconds?: number | undefined
  /**
   * The longest a cell may run whatever the model asks, in seconds (an integer from 1 to
   * 3600): a model's `timeout` above it, or 0 (no limit), is lowered to it, with a notice
   * the model reads. The host's own `timeoutSeconds` is not lowered. @default none
   */
  maxTimeoutSeconds?: number | undefined
  /** The host's id of this tool call, on every bridge call its cells make
   *  (`BridgeCall.requestId`), so `onCall` can route it. */
  requestId?: string | undefined
  /** Host-mapped schemes for this call's `read()`/`write()` (`{ local: '/abs/dir' }`; see
   *  `EvalRequest.uriRoots`). */
  uriRoots?: Record<string, string> | undefined
  signal?: AbortSignal | undefined
  onEvent?: ((cellIndex: number, event: KernelEvent) => void) | undefined
  /** Sanitized output as it is built, with the index of the cell it is of (passed to
   *  the pool as `onOutput`, see `EvalRequest.onOutput`). */
  onOutput?: ((chunk: string, cellIndex: number) => void | Promise<void>) | undefined
  /**
   * How images are sized for the model (docs/charts.md#images-sized-for-the-model):
   * `fitImages`' budget (`maxEdge` 1568 px, `maxBytes` 1 MiB per image, `maxTotalBytes`
   * 3 MiB per result, each overridable) with the originals of images reduced or left out
   * kept in `keepOriginalsIn` (default the pool's `artifactsDir`; none without one, the
   * originals then stay in `details.result.images`). `false` sends the pool's images
   * unchanged. A bad value rejects with `ERR_INVALID_ARG` before the call runs.
   * @default the budget's defaults
   */
  images?: false | FitImagesOptions | undefined
}

export interface ToolImage {
  mime: 'image/png' | 'image/jpeg'
  /** Base64. */
  data: string
}

export interface ToolResult {
  /**
   * What the model reads: the host's notices (one `[...]` line each), then `output`, and
   * last, when the pool's text names no `artifact://` address for a cut output, the line
   * `[the full output is in <path>]`, and a line for each image reduced or left out
   * (`[image 1 reduced from 2000x1500 (412 KB) to 1568x1176 (280 KB) for the model; the
   * original is <path>]`). For a refused call, the reason alone.
   */
  text: string
  /**
   * The host's notices of this call, apart from what the cell printed: the pool's
   * `annotations`, `the full output is in <path>` when the tool added that line, and one
   * for each image reduced or left out.
   */
  notices: string[]
  /**
   * The text after the notices: what the cells printed, returned and displayed, with the
   * host's own lines in it (`[…N lines elided…]`, `[full output (N lines): artifact://<id>]`,
   * `[late output from an earlier cell]`, a closing `Command exited with code 1`). A line
   * the cell printed that starts as one of those does (`[`, `Command exited with code`,
   * `(no output)`, `(displayed `) is shown with a `\` in front. Empty for a refused call.
   */
  output: string
  /** The images sized for the model (`ctx.images`); the pool's own are in
   *  `details.result.images`. Each reduced or left out has a notice line saying so and
   *  where its original is. */
  images: ToolImage[]
  /**
   * The charts of the figures the cells showed, as data (docs/charts.md), in order: the
   * pool's `charts`. Each one's card (`[chart: ...]` and a few lines) is in `output` where
   * the figure was. Empty for a refused call.
   */
  charts: Chart[]
  /** The call failed, was cancelled or timed out, or was refused. */
  isError: boolean
  details: ToolDetails
}

export interface ToolDetails {
  /** Set when the call was refused before running: `ERR_INVALID_ARG` for bad input, else
   *  the pool's code (`ERR_POOL_FULL`, `ERR_PYTHON_INVALID`, ...). */
  code?: string
  /** The model's session name and the pool's session id it maps to. */
  session?: string
  sessionId?: string
  exitCode?: 0 | 1 | null
  cancelled?: boolean
  timedOut?: boolean
  sessionLost?: boolean
  kernelRestarted?: boolean
  failedCell?: number | undefined
  truncated?: TruncationInfo | undefined
  /** The pool's whole result. */
  result?: EvalResult
}

/**
 * The JSON Schema of `ToolInput`, spelled out field by field. Type aliases of mutable
 * arrays and plain values, not interfaces, so it is assignable as it is to a JSON Schema
 * type (`JSONSchema7` of `@types/json-schema`, the AI SDK's `jsonSchema()`, an MCP tool's
 * `inputSchema`) without a copy.
 */
export type ToolSchema = {
  type: 'object'
  properties: {
    cells: {
      type: 'array'
      minItems: number
      description: string
      items: ToolCellSchema
    }
    session: { type: 'string'; minLength: number; description: string }
    timeout: ToolTimeoutSchema
    reset: { type: 'boolean'; description: string }
  }
  required: string[]
  additionalProperties: false
}

/** The JSON Schema of a `ToolCell`. */
export type ToolCellSchema = {
  type: 'object'
  properties: {
    code: { type: 'string'; description: string }
    title: { type: 'string'; description: string }
    timeout: ToolTimeoutSchema
    reset: { type: 'boolean'; description: string }
  }
  required: string[]
  additionalProperties: false
}

/** A timeout in seconds, 0 or more (0: no limit). */
export type ToolTimeoutSchema = { type: 'number'; minimum: number; description: string }

/** The tool's name as a model calls it: `"python"`. */
export declare const name: string
/**
 * The model-facing description, short (it goes with every request): sessions, the
 * timeout, shortened output and where the full text is, images, the sandbox, and where
 * the long `guide` is. `describe()` with the pool's defaults.
 */
export declare const description: string
/** What only the host knows, for `describe`. */
export interface ToolHost {
  /** The default timeout the host gives calls; 0 is no limit. @default 30 */
  timeoutSeconds?: number | undefined
  /** What code may write and reach, one sentence. @default the pool's default sandbox */
  sandbox?: string | undefined
  /** Where the model finds `guide`, one sentence. */
  guide?: string | undefined
}
/** The short description in the host's words (its timeout, sandbox, and where the guide is). */
export declare function describe(host?: ToolHost): string
/**
 * The long guide: sessions, time, output, the ready-made names in every session, IPython
 * habits, the sandbox, limits. For a model to read on demand, or a system prompt.
 */
export declare const guide: string
export declare const schema: ToolSchema
/** The session a call without `session` uses: `"default"`. */
export declare const DEFAULT_SESSION: string
/**
 * Runs one call through `ctx.pool.execute`. An optional field set to `null` counts as
 * absent (a strict-mode model sends null for each field it leaves unset). Bad input and refused calls resolve with
 * `isError` and `details.code`; a bad `ctx` rejects with `ERR_INVALID_ARG`.
 */
export declare function handle(request: unknown, ctx: ToolContext): Promise<ToolResult>
