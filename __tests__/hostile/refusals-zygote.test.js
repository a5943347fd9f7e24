'use strict'
// The refusals again, with every kernel forked from a zygote (a `preload` makes it so).
process.env.PYKERNEL_TEST_ZYGOTE = '1'
require('./refusals.test.js')
