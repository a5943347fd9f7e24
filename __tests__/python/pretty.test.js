'use strict'
// The text/plain of results and displays is pretty-printed as IPython does
// (docs/python.md#display-in-the-kernel): one key per line for a dict too wide for a line,
// sorted sets, long lists one item per line. IPython's own printer (in the test venv) is
// the reference.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel, ok, value } = require('../helpers/kernel')

// Values of every kind the printer knows, set up in one cell; each is compared by name.
const SETUP = `
import collections, re, types
import numpy as np, pandas as pd

class WithRepr:
    def __repr__(self):
        return 'WithRepr(\\n  multi-line)'

class Plain:
    pass

class Drawn:
    def _repr_pretty_(self, p, cycle):
        with p.group(6, 'Drawn(', ')'):
            p.text('items=')
            p.pretty(list(range(30)))
            p.text(',')
            p.breakable()
            p.text('done=True')

class Custom(Exception):
    pass

def function(a, b=2, *rest, key=None, **more):
    pass

looped = [1, 2]
looped.append(looped)
values = {
    'dict10': {f"key_{i}": i * 100 for i in range(10)},
    'range400': list(range(400)),
    'range1500': list(range(1500)),
    'nested': {'a': {'b': {'c': list(range(40))}}, 'd': [{'id': i, 'tags': ['x', 'y']} for i in range(4)]},
    'records': [{'id': i, 'name': 'item %d' % i, 'price': i * 1.5} for i in range(5)],
    'set': {30, 1, 20, 3},
    'mixed_set': {1, 'a', 2.5, None},
    'frozenset': frozenset({'b', 'a'}),
    'empty': (set(), frozenset(), (), [], {}),
    'tuples': ((1,), ('x' * 40, 'y' * 40), tuple(range(30))),
    'strings': ['a' * 77, 'b' * 78, 'line\\nbreak'],
    'objects': [WithRepr(), Plain(), Plain],
    'drawn': [Drawn(), Drawn()],
    'exceptions': [ValueError('bad', 2), Custom('mine')],
    'functions': [function, len, int, collections.OrderedDict],
    'pattern': [re.compile(r'\\d+\\s', re.IGNORECASE | re.MULTILINE), re.compile('x')],
    'collections': [collections.defaultdict(list, {'a': [1]}), collections.OrderedDict(a=1),
                    collections.deque(range(5), maxlen=3), collections.Counter('abracadabra'),
                    types.SimpleNamespace(a=1, b='two')],
    'cycle': looped,
    'arrays': (np.eye(3), np.arange(5)),
    'frames': {'train': pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']}), 'n': 2},
}
`

test('pretty text', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, SETUP)

  await t.test("a dict too wide for a line shows one key per line (Jupyter's text)", async () => {
    assert.equal(
      await value(kernel, '{f"key_{i}": i * 100 for i in range(10)}'),
      "{'key_0': 0,\n 'key_1': 100,\n 'key_2': 200,\n 'key_3': 300,\n 'key_4': 400,\n" +
        " 'key_5': 500,\n 'key_6': 600,\n 'key_7': 700,\n 'key_8': 800,\n 'key_9': 900}",
    )
    assert.equal(await value(kernel, "{'b': 1, 'a': 2}"), "{'b': 1, 'a': 2}", 'dicts keep their order')
  })

  await t.test('sets are sorted', async () => {
    // Python's repr gives {64, 3, 100, 5}: the order of the hash table.
    assert.equal(await value(kernel, '{100, 5, 64, 3}'), '{3, 5, 64, 100}')
    assert.equal(await value(kernel, "frozenset('fedcba')"), "frozenset({'a', 'b', 'c', 'd', 'e', 'f'})")
  })

  await t.test('list(range(400)) is 400 short lines, which no line cap cuts', async () => {
    const text = await value(kernel, 'list(range(400))')
    const lines = text.split('\n')
    assert.equal(lines.length, 400)
    assert.deepEqual([lines[0], lines[1], lines[399]], ['[0,', ' 1,', ' 399]'])
    const r = await kernel.evaluate([{ code: 'list(range(400))' }])
    assert.ok(r.output.endsWith(' 398,\n 399]\n') || r.output.endsWith(' 398,\n 399]'), r.output.slice(-40))
    assert.ok(!r.output.includes('…'))
  })

  await t.test('a display is pretty-printed too', async () => {
    const { events } = await ok(kernel, "display({'k%d' % i: 'v' * 10 for i in range(5)})")
    const [d] = events.filter((e) => e.type === 'display')
    assert.equal(d.bundle['text/plain'].split('\n').length, 5)
  })

  await t.test("each kind of value reads as IPython's printer writes it", async () => {
    const names = JSON.parse((await value(kernel, 'import json\njson.dumps(list(values))')).slice(1, -1))
    assert.ok(names.length > 15)
    for (const name of names) {
      const ours = await value(kernel, `values[${JSON.stringify(name)}]`)
      const { events } = await ok(kernel, `from IPython.lib.pretty import pretty\nprint(pretty(values[${JSON.stringify(name)}]))`)
      const theirs = events.filter((e) => e.type === 'stdout').map((e) => e.text).join('').replace(/\n$/, '')
      assert.equal(ours, theirs, name)
    }
  })

  await t.test('where IPython leaves a line longer than 79 characters, ours breaks it', async () => {
    // IPython breaks a tuple key and leaves the end of its value on one overlong line, and
    // does the same to a list holding a multi-line repr inside another list; docs/python.md
    // lists these differences.
    for (const code of ["{(1, 'a'): [list(range(30)), 'x' * 40, 'y' * 40]}", "[[1, 2], [3, WithRepr(), 'z' * 70]]"]) {
      const text = await value(kernel, code)
      assert.ok(text.split('\n').every((line) => line.length <= 79), text)
    }
    assert.match(await value(kernel, "{(1, 'a'): [list(range(30)), 'x' * 40]}"), /^\{\(1, 'a'\): \[\[0,\n/)
  })

  await t.test('a repr that fails is reported in text/plain; the other MIME types stay', async () => {
    const code = [
      'class Bad:',
      "    def __repr__(self): raise RuntimeError('no repr')",
      "    def _repr_html_(self): return '<b>html</b>'",
      'Bad()',
    ].join('\n')
    const { result } = await ok(kernel, code)
    assert.deepEqual(result.result, { 'text/html': '<b>html</b>', 'text/plain': '<repr failed: RuntimeError: no repr>' })
  })
})

test('a plain int or str result imports neither the printer nor the display module', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  assert.equal(await value(kernel, '1 + 1'), '2')
  assert.equal(await value(kernel, "'text'"), "'text'")
  assert.equal(
    await value(kernel, "import sys\n' '.join(m for m in ('pykernel_runner.pretty', 'pykernel_runner.display', 'pprint') if m in sys.modules)"),
    "''",
  )
})
