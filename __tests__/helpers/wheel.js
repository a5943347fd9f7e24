'use strict'
// A wheel for the installs tests, written by hand, and a package index on loopback that
// serves it (PEP 503's simple layout), so pip installs without building or fetching.
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { systemPython } = require('./hosts')

/** A wheel of distribution `pk-defaults` (module `pkdefaults`), written by hand (a wheel is
 *  a zip with its metadata), so nothing is built or fetched. */
function writeWheel(dir) {
  const file = path.join(dir, 'pk_defaults-1.0-py3-none-any.whl')
  execFileSync(systemPython(), ['-c', `
import zipfile, sys
files = {
    'pkdefaults/__init__.py': '__version__ = "1.0"\\n',
    'pk_defaults-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: pk-defaults\\nVersion: 1.0\\n',
    'pk_defaults-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
record = ''.join('%s,,\\n' % name for name in files) + 'pk_defaults-1.0.dist-info/RECORD,,\\n'
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr('pk_defaults-1.0.dist-info/RECORD', record)
`, file])
  fs.chmodSync(file, 0o644)
  return file
}

/** An HTTP server on 127.0.0.1 (a port of its own) serving `wheel` as the only
 *  distribution of a simple index at `/simple/`; resolves `{ server, port, requests }`
 *  (`requests`: the paths asked for). */
async function packageIndex(wheel) {
  const name = path.basename(wheel)
  const requests = []
  const server = http.createServer((req, res) => {
    requests.push(req.url)
    if (req.url === '/simple/pk-defaults/') {
      res.setHeader('Content-Type', 'text/html')
      res.end(`<!DOCTYPE html><html><body><a href="/files/${name}">${name}</a></body></html>`)
    } else if (req.url === `/files/${name}`) {
      res.setHeader('Content-Type', 'application/octet-stream')
      res.end(fs.readFileSync(wheel))
    } else if (req.url.startsWith('/bytes/')) {
      // A body of the size asked for, for the proxy's throughput.
      const size = Number(req.url.slice('/bytes/'.length))
      res.setHeader('Content-Length', String(size))
      const chunk = Buffer.alloc(64 * 1024, 120)
      let left = size
      const more = () => {
        while (left > 0) {
          const part = left >= chunk.length ? chunk : chunk.subarray(0, left)
          left -= part.length
          if (!res.write(part)) return res.once('drain', more)
        }
        res.end()
      }
      more()
    } else {
      res.statusCode = 404
      res.end('not here\n')
    }
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, port: server.address().port, requests }
}

module.exports = { writeWheel, packageIndex }
