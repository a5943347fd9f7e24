'use strict'
// defaults.test.js again, with every kernel forked from a zygote: a forked kernel builds
// the same view (its overlay of the environment, its credential stand-ins, its read-only
// .git) itself, and must hold against the same attacks.
process.env.PYKERNEL_TEST_ZYGOTE = '1'
require('./defaults.test.js')
