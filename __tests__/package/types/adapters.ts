// The framework adapters' types as a host uses them, through the exports map (compiled by
// types.test.js with tsc --strict --exactOptionalPropertyTypes).
import { KernelPool } from 'pykernel'
import * as aiSdk from 'pykernel/ai-sdk'
import * as agents from 'pykernel/openai-agents'
import { schema, type ToolResult } from 'pykernel/tool'

async function main(): Promise<void> {
  const pool = new KernelPool({})
  const controller = new AbortController()

  const python: aiSdk.AiSdkTool = aiSdk.pythonTool({ pool, sessionId: 'chat-1', signal: controller.signal, imagePart: 'file', stream: false })
  const description: string = python.description
  const inputJsonSchema: object = aiSdk.inputSchema.jsonSchema
  const result: ToolResult = await aiSdk.pythonTool({ pool }).execute({ cells: [{ code: '1' }] }, { toolCallId: 'c', abortSignal: controller.signal })
  for await (const partial of aiSdk.pythonTool({ pool, stream: true }).execute({ cells: [{ code: '1' }] })) console.log(partial.text)
  const content: aiSdk.AiSdkContentOutput = python.toModelOutput({ toolCallId: 'c', input: {}, output: result })
  for (const part of aiSdk.toModelOutput(result, 'file').value) {
    if (part.type === 'text') console.log(part.text.length)
    else if (part.type === 'file') console.log(part.mediaType, part.data.data.length)
    else console.log(part.mediaType, part.data.length)
  }

  const options: agents.AgentsToolOptions = agents.pythonTool({ pool, cwd: '/tmp', timeoutSeconds: 60, description: 'Run Python.' })
  const strict: true = options.strict
  const required: string[] = agents.parameters.required
  const output: agents.AgentsToolOutput = await options.execute({ cells: [{ code: '1' }] }, undefined, { signal: controller.signal })
  const again: Record<string, unknown> = agents.strictSchema(schema)
  const text: agents.AgentsToolOutput = agents.toolOutput(result)
  console.log(description, inputJsonSchema, content, strict, required, output, again, text, aiSdk.name, agents.name)
  // @ts-expect-error the pool is required
  aiSdk.pythonTool({})
  // @ts-expect-error the pool is required
  agents.pythonTool({ sessionId: 'x' })
  await pool.disposeAll()
}

void main
