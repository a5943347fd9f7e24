'use strict'
// The isolation suite again, with every kernel forked from a zygote: each
// attack of isolation.test.js must fail the same way against a forked kernel. Its
// kernel.isolation and attack-host tests check that the kernels really were forked.
process.env.PYKERNEL_TEST_ZYGOTE = '1'
require('./isolation.test.js')
