'use strict'
// The edge attacks again, with every kernel forked from a zygote (a `preload` makes it so).
process.env.PYKERNEL_TEST_ZYGOTE = '1'
require('./edges.test.js')
