'use strict'
// Options objects checked for keys their interface in `index.d.ts` does not declare:
// napi-rs reads the fields it knows and ignores the rest, so a misspelt option did
// nothing and said nothing (`sandbox: {writeable: [dir]}` gave a kernel that writes
// anywhere). The keys are option-keys.js, generated from `index.d.ts` after each build
// (scripts/option-table.js says why there); `main.js` calls this before the binding.
// Free-form dictionaries (`env`, `baseEnv`, MIME bundles) are not interfaces, so any key
// goes in them.
const OPTION_KEYS = require('./option-keys.js')

/** The error for the first key of `args` that the options objects of `entry` (a key of
 *  `OPTION_KEYS.entryPoints`) do not have, searched depth first; undefined when none.
 *  A value that is not an object is left to napi, which names the type it wanted. */
function unknownOption(entry, args) {
  const slots = OPTION_KEYS.entryPoints[entry] || []
  for (const [i, slot] of slots.entries()) {
    const error = slot && unknownKey(args[i], slot.shape, Array.isArray(slot.shape) ? slot.name : '')
    if (error) return error
  }
  return undefined
}

/** The error for the first unknown key in `value`, an object of `shape` (an interface's
 *  name, or `[name]` for an array of them) at `path`. */
function unknownKey(value, shape, path) {
  if (shape === null || value === null || typeof value !== 'object') return undefined
  if (Array.isArray(shape) !== Array.isArray(value)) return undefined
  if (Array.isArray(value)) {
    for (const [i, element] of value.entries()) {
      const error = unknownKey(element, shape[0], `${path}[${i}]`)
      if (error) return error
    }
    return undefined
  }
  const fields = OPTION_KEYS.interfaces[shape]
  for (const key of Object.keys(value)) {
    const at = path ? `${path}.${key}` : key
    if (!Object.hasOwn(fields, key)) return unknownKeyError(at, key, shape, Object.keys(fields))
    const error = unknownKey(value[key], fields[key], at)
    if (error) return error
  }
  return undefined
}

function unknownKeyError(at, key, shape, known) {
  const near = nearest(key, known)
  const error = new TypeError(
    `invalid argument \`${at}\`: ${shape} has no key \`${key}\`` +
      (near ? ` (did you mean \`${near}\`?)` : '') +
      `; its keys are ${known.join(', ')}`,
  )
  error.code = 'ERR_INVALID_ARG'
  return error
}

/** The key of `known` that `key` most likely misspells, ignoring case: at most two edits
 *  away (a letter added, dropped, changed, or two neighbours swapped: `timeout_ms`,
 *  `netwrok`, `cdw`) and not mostly different; undefined when none is. */
function nearest(key, known) {
  let best
  let bestDistance = 3
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k.toLowerCase())
    if (d < bestDistance && d * 2 < k.length) [best, bestDistance] = [k, d]
  }
  return best
}

/** Optimal string alignment distance: Levenshtein's, with a swap of neighbours one edit. */
function editDistance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
}

module.exports = { unknownOption }
