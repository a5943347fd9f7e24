'use strict'
// CPU placement for the warm round trip's explanatory rows. On an unpinned 2-core machine
// the scheduler decides whether Node and the kernel share a core (each wake-up is then a
// cheap switch and a round trip costs the CPU work of both ends) or run on two (each
// wake-up crosses cores, which on this VM costs tens of µs). It picks per process pair and
// keeps to it, so the unpinned echo floor and pykernel can land in different regimes; these
// rows pin both to the same placement to show each regime on its own.
const os = require('node:os')
const { execFileSync } = require('node:child_process')

const cpuCount = () => (typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length)

/** Why placement cannot be measured here, or null when it can. */
function placementUnavailable() {
  if (cpuCount() < 2) return 'needs 2 CPUs'
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' })
  } catch {
    return 'taskset (util-linux) not found'
  }
  return null
}

/** Every thread of `pid` onto `cpus` (a taskset list such as "0" or "0-1"). */
function pin(pid, cpus) {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' })
}

const PLACEMENTS = [
  { key: 'OneCore', host: '0', kernel: '0' },
  { key: 'TwoCores', host: '0', kernel: '1' },
]

/** Runs `measure(key)` with the host on one core and `pids` pinned as each placement says,
 *  then gives everything every CPU again. */
async function underEachPlacement(pids, measure) {
  const all = `0-${cpuCount() - 1}`
  try {
    for (const p of PLACEMENTS) {
      pin(process.pid, p.host)
      for (const pid of pids) pin(pid, p.kernel)
      await measure(p.key)
    }
  } finally {
    pin(process.pid, all)
    for (const pid of pids) {
      try {
        pin(pid, all)
      } catch {} // gone
    }
  }
}

module.exports = { placementUnavailable, underEachPlacement }
