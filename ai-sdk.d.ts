// `pykernel/ai-sdk`: the Python tool for the Vercel AI SDK (`ai`, v5 and later). The types
// below are structural, so this file compiles without `ai` installed; the object
// `pythonTool` returns is assignable to the SDK's `Tool`.
import type { ToolContext, ToolResult, ToolSchema } from './tool'

/** The input schema in the form the SDK's `jsonSchema(schema)` returns. */
export interface AiSdkSchema {
  readonly jsonSchema: ToolSchema
  readonly validate: undefined
}

/** What the SDK passes `execute` beside the input (the fields this tool reads). */
export interface AiSdkExecuteOptions {
  toolCallId?: string
  abortSignal?: AbortSignal | undefined
}

/** The tool result content the model reads: the text, then each image (base64). */
export interface AiSdkContentOutput {
  type: 'content'
  value: Array<
    | { type: 'text'; text: string }
    /** `image-data` from v6 on; `media` for v5. */
    | { type: 'image-data' | 'media'; data: string; mediaType: string }
    /** With `imagePart: 'file'` (v7's own form). */
    | { type: 'file'; data: { type: 'data'; data: string }; mediaType: string }
  >
}

/** The forms of an image in the SDK's tool result content. */
export type AiSdkImagePart = 'image-data' | 'file' | 'media'

/** The tool, as the SDK's `tool({...})` returns it. */
export interface AiSdkTool extends AiSdkToolParts {
  /** Runs the call through `handle`; the SDK's `abortSignal` cancels it. */
  execute(input: unknown, options?: AiSdkExecuteOptions): Promise<ToolResult>
}

/** The tool with `stream: true`. */
export interface AiSdkStreamingTool extends AiSdkToolParts {
  /**
   * Runs the call through `handle`, yielding a preliminary result (the output so far,
   * `details` empty) each time output arrives and the call's result last; the SDK's
   * `abortSignal` cancels it.
   */
  execute(input: unknown, options?: AiSdkExecuteOptions): AsyncIterable<ToolResult>
}

export interface AiSdkToolParts {
  description: string
  /**
   * An `AiSdkSchema` (the same object as `inputSchema` below). Typed `any` because the
   * SDK's `Schema` type is branded with a symbol it does not export, so no declaration of
   * ours could be assignable to it without importing the SDK.
   */
  inputSchema: any
  /**
   * v6 and later call it with `{ toolCallId, input, output }`, v5 with the output. Returns
   * an `AiSdkContentOutput`, typed `any` because each major's type of it takes other image
   * forms (v5 only `media`, v6 no `file`, v7 no `media`): no one type is assignable to all.
   */
  toModelOutput(options: { toolCallId: string; input: unknown; output: ToolResult } | ToolResult): any
}

/** `handle`'s context (the pool, and the conversation, cwd, timeout, signal, callbacks),
 *  and how the tool gives images and output. */
export interface PythonToolOptions extends ToolContext {
  /**
   * The model-facing description. By default `describe()` of `pykernel/tool` with
   * `timeoutSeconds`, saying the full `guide` is in the instructions when the host put it
   * there (`system`).
   */
  description?: string | undefined
  /**
   * The form of images in `toModelOutput`: by default `image-data` (v6, v7) or, called as
   * v5 calls it, `media`; `'file'` is v7's own form (no deprecation notice).
   */
  imagePart?: AiSdkImagePart | undefined
  /** `execute` yields the output so far as preliminary results (the SDK streams them). */
  stream?: boolean | undefined
}

/** The tool for `generateText({ tools: { python: pythonTool({ pool }) } })`. */
export declare function pythonTool(options: PythonToolOptions & { stream: true }): AiSdkStreamingTool
export declare function pythonTool(options: PythonToolOptions & { stream?: false | undefined }): AiSdkTool
export declare const inputSchema: AiSdkSchema
export declare function toModelOutput(options: { toolCallId: string; input: unknown; output: ToolResult } | ToolResult, imagePart?: AiSdkImagePart): AiSdkContentOutput
/** The name to register the tool under: `"python"`. */
export declare const name: string
