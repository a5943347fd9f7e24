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
  >
}

/** The tool, as the SDK's `tool({...})` returns it. */
export interface AiSdkTool {
  description: string
  /**
   * An `AiSdkSchema` (the same object as `inputSchema` below). Typed `any` because the
   * SDK's `Schema` type is branded with a symbol it does not export, so no declaration of
   * ours could be assignable to it without importing the SDK.
   */
  inputSchema: any
  /** Runs the call through `handle`; the SDK's `abortSignal` cancels it. */
  execute(input: unknown, options?: AiSdkExecuteOptions): Promise<ToolResult>
  /** v6 and later call it with `{ toolCallId, input, output }`, v5 with the output. */
  toModelOutput(options: { toolCallId: string; input: unknown; output: ToolResult } | ToolResult): AiSdkContentOutput
}

/** `handle`'s context: the pool, and the conversation, cwd, timeout, signal, callbacks. */
export type PythonToolOptions = ToolContext

/** The tool for `generateText({ tools: { python: pythonTool({ pool }) } })`. */
export declare function pythonTool(options: PythonToolOptions): AiSdkTool
export declare const inputSchema: AiSdkSchema
export declare function toModelOutput(options: { toolCallId: string; input: unknown; output: ToolResult } | ToolResult): AiSdkContentOutput
/** The name to register the tool under: `"python"`. */
export declare const name: string
