'use strict'
// egress.test.js again, with every kernel forked from a zygote: a forked kernel makes its
// proxy's listener itself, in its own network namespace, and hands it to the host the same way.
process.env.PYKERNEL_TEST_ZYGOTE = '1'
require('./egress.test.js')
