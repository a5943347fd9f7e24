// A host's test written against pykernel/testing's declarations, type-checked strictly.
import { KernelPool } from 'pykernel'
import { createStandInKernel, latch, pythonError, type StandInCell, type StandInKernel, type StandInExit } from 'pykernel/testing'

async function main(): Promise<void> {
  const gate = latch()
  const fake = await createStandInKernel({
    onStart: async (kernel: StandInKernel) => {
      if (kernel.ordinal === 2) kernel.ignore({ shutdown: true, pings: true })
    },
    onExecute: async (cell: StandInCell, kernel: StandInKernel) => {
      if (cell.code === 'fail') throw pythonError('ValueError', 'boom')
      if (cell.code === 'block') await gate.promise
      kernel.stdout('out\n')
      kernel.display({ 'text/plain': 'shown' }, { displayId: 'd1' })
      const answer: unknown = await kernel.call('lookup', { q: cell.code })
      return typeof answer === 'string' ? answer : { 'application/json': answer }
    },
  })
  const launcher: string[] = fake.launcher
  const pool = new KernelPool({ kernel: { launcher, onCall: () => 'found' }, prewarm: 0 })
  const r = await pool.execute({ sessionId: 's', cells: [{ code: 'x' }] })
  const first: StandInKernel = await fake.kernel(1)
  const exit: StandInExit | null = first.exit
  const n: number = fake.starts + fake.exitRequests + fake.running.length + first.cells.length
  gate.release()
  await pool.disposeAll()
  const ended: StandInExit = await first.ended
  await fake.close()
  console.log(r.output.trim(), exit, n > 0, ended.reason)
}

void main()
