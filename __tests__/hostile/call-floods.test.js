'use strict'
// A cell floods the host with bridge calls: it writes forged `call` frames (with its real
// request id, on the protocol pipe it finds through the garbage collector) for a few
// seconds, each naming a tool the host answers only after 2 s, while 8 threads make real
// calls in a loop. Every call frame is work the host holds (a task, a pending `onCall`, a
// reply); without a bound the host's memory grows with the flood (measured: +750 to
// +850 MB in 3 s). The host works on at most 64 calls of a kernel at once and reads no further frame
// until one ends (`src/kernel/call_limits.rs`), so the flood waits in the kernel's pipe.
// The host's RSS peak during the flood is compared with its peak during an ordinary cell
// (100 threads each making one call, which all succeed) in the same host process, as root
// and as an ordinary user (`useradd`). A second cell floods forged calls of a quick tool for
// ever and makes no real call: its `timeoutMs` stops it, the kernel lives, and the same
// memory bound holds. Afterwards the kernel still runs cells and another kernel of the same
// host answers as fast as before the floods (within the probe bound).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { systemPython, runEdgeHost, attackModes } = require('../helpers/hosts')
const { MB, PROBE_BOUND_MS } = require('./_common')

const FIXTURE = path.join(__dirname, 'fixtures', 'call-flood-host.js')
const FLOOD_SECONDS = 3
/** What the host may grow by during the flood over its peak during the ordinary cell:
 *  64 calls in flight of 16 KiB arguments (each held as the frame's value, the JSON
 *  handed to `onCall` and its object there), the route's 64 frames and the pipe's
 *  reads, with room for the allocator (measured: +6 to +7 MB; without the limit, +750 to +850 MB). */
const FLOOD_RSS_BOUND = 80 * MB
/** As `_common`'s probe: a second kernel's `1+1` after the flood within this factor of its
 *  quiet median (or PROBE_BOUND_MS, whichever is larger). */
const PROBE_FLOOR_FACTOR = 10

// The attack does not depend on user namespaces: as root and as the ordinary user.
for (const mode of attackModes().filter((m) => !m.host.noUserns)) {
  const skip = mode.needsUser && !mode.host.user ? 'needs root and useradd: the test user is made with useradd' : false
  test(`${mode.name}: a cell flooding the host with call frames keeps host memory bounded; 100 threads' calls all succeed`, { skip, timeout: 240_000 }, async (t) => {
    const plan = { interpreter: systemPython(), floodSeconds: FLOOD_SECONDS, payloadBytes: 16 * 1024, delayMs: 50, slowMs: 2000, legitThreads: 100, endlessTimeoutMs: 3000 }
    const result = await runEdgeHost(mode.host, [], { fixture: FIXTURE, plan, timeoutMs: 200_000 })
    t.after(() => fs.rmSync(result.dir, { recursive: true, force: true }))
    const report = result.report
    assert.ok(report && !report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${report?.fatal ?? ''} ${result.stderr.slice(-2000)}`)
    if (mode.host.user) assert.equal(report.uid, mode.host.user.uid, 'the host ran as the ordinary user')

    // Legitimate concurrency: more threads than calls in flight, every call answered.
    assert.equal(report.legit.status, 'ok', JSON.stringify(report.legit))
    assert.equal(report.legit.legit, plan.legitThreads, `every thread's call succeeded: ${JSON.stringify(report.legit.legitErrors)}`)

    const growth = report.floodRss - report.floorRss
    t.diagnostic(`${mode.name}: ${report.flood.forged} forged call frames in ${(report.floodMs / 1000).toFixed(1)} s, ${report.callsSeen} calls reached onCall; host RSS floor ${(report.floorRss / MB).toFixed(0)} MB, peak during the flood ${(report.floodRss / MB).toFixed(0)} MB (+${(growth / MB).toFixed(0)} MB)`)
    assert.ok(report.flood.forged > 0, 'the cell wrote forged frames')
    assert.ok(growth < FLOOD_RSS_BOUND, `host RSS grew by ${(growth / MB).toFixed(0)} MB during the call flood (bound ${FLOOD_RSS_BOUND / MB} MB)`)

    // The flood ended the cell normally; its real calls all got their answers.
    assert.equal(report.flood.status, 'ok', JSON.stringify(report.flood))
    assert.equal(report.flood.kernelDied, false)
    assert.deepEqual(report.flood.realErrors, [], 'the real calls made during the flood succeeded')
    assert.ok(report.flood.realOk > 0, 'real calls were answered during the flood')

    // The endless flood: stopped by its timeout, the kernel alive, memory as bounded.
    const endlessGrowth = report.endlessRss - report.floorRss
    t.diagnostic(`${mode.name}: endless flood of a quick tool: ${JSON.stringify(report.endless)}; host RSS peak ${(report.endlessRss / MB).toFixed(0)} MB (+${(endlessGrowth / MB).toFixed(0)} MB over the floor)`)
    assert.equal(report.endless.timedOut, true, `the endless flood was stopped by its timeout: ${JSON.stringify(report.endless)}`)
    assert.equal(report.endless.kernelDied, false, `the kernel survived the endless flood: ${JSON.stringify(report.endless)}`)
    assert.ok(endlessGrowth < FLOOD_RSS_BOUND, `host RSS grew by ${(endlessGrowth / MB).toFixed(0)} MB during the endless call flood (bound ${FLOOD_RSS_BOUND / MB} MB)`)

    // Usable afterwards, and the host is responsive.
    assert.equal(report.after, '2', `the kernel runs cells after the flood: ${JSON.stringify(report.after)}`)
    const bound = Math.max(PROBE_BOUND_MS, PROBE_FLOOR_FACTOR * report.probeQuiet)
    assert.ok(report.probeAfter < bound, `another kernel answered 1+1 in a median ${report.probeAfter.toFixed(1)} ms after the flood; bound ${bound.toFixed(0)} ms (quiet ${report.probeQuiet.toFixed(1)} ms)`)
    assert.deepEqual(report.shutdown, [true, true], 'both kernels shut down confirmed')
  })
}
