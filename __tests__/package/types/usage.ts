// A strict-mode program against index.d.ts (compiled by types.test.js with tsc --strict
// --exactOptionalPropertyTypes): what an agent host writes must type-check, and what
// fails at run time must not.
import {
  Kernel,
  KernelPool,
  KvStore,
  checkPythonKernelAvailability,
  evalBackends,
  filterEnv,
  resolvePython,
  type ErrorCode,
  type ExecuteResult,
  type EvalResult,
  type KernelEvent,
  type PykernelError,
} from '../../..'

async function main(): Promise<void> {
  // process.env is what hosts pass as an environment.
  const kernel: Kernel = await Kernel.start({ baseEnv: process.env, cwd: process.env.HOME })
  filterEnv(process.env)
  await evalBackends({ env: process.env })
  await resolvePython({ baseEnv: process.env })
  const availability = await checkPythonKernelAvailability({ baseEnv: process.env })
  const reason: string | undefined = availability.reason

  // Optional fields take undefined (exactOptionalPropertyTypes).
  const maybe: number | undefined = undefined
  const events: KernelEvent[] = []
  const result: ExecuteResult = await kernel.execute('6*7', {
    timeoutMs: maybe,
    onEvent: (event) => events.push(event),
    signal: new AbortController().signal,
  })
  const text: unknown = result.result?.['text/plain']
  const evaluated: EvalResult = await kernel.evaluate([{ code: 'print(1)' }], {
    timeoutMs: 0,
    // An async handler is awaited before the next event.
    onEvent: async (cellIndex, event) => {
      await new Promise((resolve) => setTimeout(resolve, 1))
      if (event.type === 'stdout') events.push(event)
      void cellIndex
    },
  })
  const exitCode: 0 | 1 | null = evaluated.exitCode
  // A chart narrows by its type; fields the schema does not list are still readable.
  for (const chart of evaluated.charts) {
    if (chart.type === 'bar') {
      const values: Array<number | null> = chart.elements.map((bar) => bar.value)
      void values
    } else if (chart.type === 'superchart') {
      const titles: Array<string | null> = chart.elements.map((sub) => sub.title)
      void titles
    }
    const extra: unknown = chart['not_in_the_schema']
    void extra
  }
  for (const event of events) {
    if (event.type === 'error') {
      const died: boolean = event.ename === 'KernelDied'
      void died
    }
  }

  // Error codes are a closed union.
  try {
    await kernel.execute('1')
  } catch (error) {
    const code: ErrorCode = (error as PykernelError).code
    if (code === 'ERR_KERNEL_DEAD') throw error
  }

  const pool = new KernelPool({ kernel: { baseEnv: process.env } })
  await pool.execute({ sessionId: 's', cells: [{ code: '1' }], timeoutSeconds: maybe })
  await pool.disposeAll()
  const keys: string[] = await new KvStore('/tmp', 's').list()
  void keys

  // @ts-expect-error: a kernel is made by Kernel.start(); `new Kernel()` throws at run time.
  new Kernel()

  void reason, text, exitCode
  await kernel.shutdown()
}

void main
