// `pykernel/openai-agents`: the Python tool for the OpenAI Agents SDK (`@openai/agents`).
// The types below are structural, so this file compiles without the SDK installed; the
// options `pythonTool` returns are what the SDK's `tool()` takes.
import type { ToolContext, ToolResult } from './tool'

/** A JSON Schema object in OpenAI's strict mode: every property required, no other. */
export interface StrictObjectSchema {
  type: 'object'
  properties: Record<string, unknown>
  required: string[]
  additionalProperties: false
  [keyword: string]: unknown
}

/** The SDK's structured tool output: text, and images as base64 with their media type. */
export type AgentsToolOutput =
  | string
  | Array<{ type: 'text'; text: string } | { type: 'image'; image: { data: string; mediaType: string } }>

/** The options for the SDK's `tool()`. */
export interface AgentsToolOptions {
  name: string
  description: string
  parameters: StrictObjectSchema
  strict: true
  /** Runs the call through `handle`; `details.signal` (the run's) cancels it. */
  execute(input: unknown, runContext?: unknown, details?: { signal?: AbortSignal | undefined }): Promise<AgentsToolOutput>
}

/** `handle`'s context (the pool, and the conversation, cwd, timeout, signal, callbacks),
 *  and the description. */
export interface PythonToolOptions extends ToolContext {
  /**
   * The model-facing description. By default `describe()` of `pykernel/tool` with
   * `timeoutSeconds`, saying the full `guide` is in the instructions when the host put it
   * there (the agent's `instructions`).
   */
  description?: string | undefined
}

/** The options for `tool(pythonTool({ pool }))` from `@openai/agents`. */
export declare function pythonTool(options: PythonToolOptions): AgentsToolOptions
/** `pykernel/tool`'s schema made strict. */
export declare const parameters: StrictObjectSchema
/**
 * A JSON Schema made strict: in every object each property required and no other allowed,
 * optional ones nullable, value constraints (minLength, minItems, exclusiveMinimum, ...)
 * left out.
 */
export declare function strictSchema(schema: object): Record<string, unknown>
/** A result as the tool returns it to the SDK: the text, or text and images. */
export declare function toolOutput(result: ToolResult): AgentsToolOutput
/** The tool's name: `"python"`. */
export declare const name: string
