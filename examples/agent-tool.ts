// An agent's Python tool in a few lines: pykernel/tool gives the name, JSON Schema and
// description a model sees, and `handle` runs a call through a KernelPool. The tool loop
// below is the shape of any agent (the model asks for a tool, the host runs it, the result
// goes back); a scripted stand-in plays the model so the example runs without one.
// `__tests__/example.test.js` compiles it with `tsc --strict` and runs it.
import { rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { KernelPool } from 'pykernel'
import * as python from 'pykernel/tool'
import type { ToolResult } from 'pykernel/tool'

/** A tool as an agent framework holds it. */
interface AgentTool {
  name: string
  description: string
  inputSchema: object
  run(input: unknown, signal: AbortSignal, onUpdate: (text: string) => void): Promise<ToolResult>
}

/** A model's request to call a tool. */
interface ToolCall {
  tool: string
  input: unknown
}

// Full output of truncated calls goes here (and the sessions' kv stores).
const artifactsDir = join(tmpdir(), `agent-tool-example-${process.pid}`)
const pool = new KernelPool({
  kernel: { cwd: process.cwd(), ...(process.env.PYKERNEL_PYTHON ? { interpreter: process.env.PYKERNEL_PYTHON } : {}) },
  artifactsDir,
})
const conversationId = 'conversation-1'

const tools: AgentTool[] = [
  {
    name: python.name,
    description: python.description,
    inputSchema: python.schema,
    // Sessions are scoped to the conversation; the model may name more within it.
    run: (input, signal, onUpdate) => python.handle(input, { pool, sessionId: conversationId, signal, onOutput: onUpdate }),
  },
]

/** The stand-in model: the calls a model might make, in order. */
const scriptedCalls: ToolCall[] = [
  { tool: 'python', input: { cells: [{ code: 'import statistics\ndata = [3, 1, 4, 1, 5, 9, 2, 6]', title: 'load' }] } },
  { tool: 'python', input: { cells: [{ code: 'print("\\x1b[1mmean\\x1b[0m", statistics.mean(data))\nsorted(data)' }] } },
  { tool: 'python', input: { cells: [{ code: 'data[100]', title: 'oops' }] } },
]

async function agentLoop(calls: ToolCall[], signal: AbortSignal): Promise<string[]> {
  const transcript: string[] = []
  for (const call of calls) {
    const tool = tools.find((t) => t.name === call.tool)
    if (!tool) {
      transcript.push(`unknown tool ${call.tool}`)
      continue
    }
    // Streamed output is already sanitized: a UI can print it as it comes.
    const result = await tool.run(call.input, signal, (text) => process.stderr.write(text))
    const images = result.images.length ? ` [+${result.images.length} image(s)]` : ''
    transcript.push(`${result.isError ? 'error' : 'ok'}: ${result.text.trimEnd()}${images}`)
  }
  return transcript
}

async function main(): Promise<void> {
  const controller = new AbortController()
  process.once('SIGINT', () => controller.abort())
  try {
    for (const line of await agentLoop(scriptedCalls, controller.signal)) console.log(line)
  } finally {
    await pool.disposeAll({ budgetMs: 2000 })
    rmSync(artifactsDir, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
