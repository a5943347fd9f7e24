// The adapters' objects where the frameworks' own types expect them (compiled by
// types.test.js against the devDependencies `ai` and `@openai/agents`): our structural
// declarations are assignable to the real ones.
import { Agent, tool } from '@openai/agents'
import { generateText, stepCountIs, type Tool, type ToolSet } from 'ai'
import { KernelPool } from 'pykernel'
import * as aiSdk from 'pykernel/ai-sdk'
import * as agents from 'pykernel/openai-agents'

async function main(): Promise<void> {
  const pool = new KernelPool({})
  const python: Tool = aiSdk.pythonTool({ pool })
  const streaming: Tool = aiSdk.pythonTool({ pool, stream: true, imagePart: 'image-data' })
  const tools: ToolSet = { python, streaming }
  await generateText({ model: 'openai/gpt-5', tools, prompt: 'x', stopWhen: stepCountIs(2) })
  const agent = new Agent({ name: 'analyst', tools: [tool(agents.pythonTool({ pool }))] })
  console.log(agent.name)
}

void main
