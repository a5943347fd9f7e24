'use strict'
// The CI part of the differential test against Jupyter (`npm run compat`, compat/run.js):
// the sessions of compat/cells marked `# compat: ci` run through pykernel in the test
// venv, and every cell that matched Jupyter in the latest full run (`matches` in
// compat/expected.json) must still give what ipykernel gave, field by field after the
// same normalization. No ipykernel is needed: Jupyter's outputs are the recorded ones.
// A cell that still differs from Jupyter is only named (a diagnostic, not a test); when one
// of them comes to match, `npm run compat` marks it and from then on it is held here too.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startKernel } = require('../helpers/kernel')
const { loadSessions } = require('../../compat/lib/cells')
const { comparable, differences } = require('../../compat/lib/compare')
const { readExpected } = require('../../compat/lib/expected')
const { runCell } = require('../../compat/lib/pykernel_side')

const expected = readExpected()
const sessions = loadSessions().filter((s) => s.ci)

test('the CI subset of compat/cells is recorded', () => {
  assert.ok(sessions.length >= 5, `only ${sessions.length} sessions are marked '# compat: ci'`)
  const missing = sessions.flatMap((s) => s.cells).filter((c) => !expected.cells[c.key]?.jupyter).map((c) => c.key)
  assert.deepEqual(missing, [], 'cells without a recorded Jupyter output: run `npm run compat` to record them')
})

for (const session of sessions) {
  test(`compat ${session.name}: cells that matched Jupyter still match`, { timeout: 120_000 }, async (t) => {
    const cwd = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `pykernel-compat-${session.name}-`)))
    const kernel = await startKernel({ cwd })
    t.after(async () => {
      await kernel.shutdown()
      fs.rmSync(cwd, { recursive: true, force: true })
    })
    for (const cell of session.cells) {
      const record = expected.cells[cell.key]
      // Every cell runs, matching or not: the later ones depend on its state.
      const actual = comparable(await runCell(kernel, cell.code), cwd)
      if (!record?.matches) {
        const why = record ? `differs from Jupyter in ${(record.differs || []).join(', ')}` : 'not recorded'
        t.diagnostic(`${cell.id}: ${why} (compat/results/latest.md); not held`)
        continue
      }
      await t.test(cell.id, () => {
        const fields = differences(record.jupyter, actual)
        const shown = Object.fromEntries(fields.map((f) => [f, { jupyter: record.jupyter[f], pykernel: actual[f] }]))
        assert.deepEqual(
          fields,
          [],
          `${cell.key} matched Jupyter (recorded ${expected.recorded} with ${JSON.stringify(expected.versions)}) and now differs:\n` +
            `${JSON.stringify(shown, null, 1)}\ncell:\n${cell.code}`,
        )
      })
    }
  })
}
