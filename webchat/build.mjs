// Bundles src/main.jsx with @botpress/webchat and React into one minified
// script and one stylesheet that Django serves as static files.
//
//   node build.mjs [outdir]      (or WEBCHAT_OUTDIR=… node build.mjs)
//
// outdir defaults to ../chat/static/webchat. The same inputs give
// byte-identical outputs: no source map, no timestamp, and every path esbuild
// could print is relative to this folder (absWorkingDir), so the clone's
// location does not matter. .ci/webchat-bundle holds the committed files to that.
import { build } from 'esbuild'
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const outdir = path.resolve(
  process.argv[2] ?? process.env.WEBCHAT_OUTDIR ?? path.join(here, '..', 'chat', 'static', 'webchat'),
)
mkdirSync(outdir, { recursive: true })

const result = await build({
  absWorkingDir: here,
  entryPoints: { webchat: 'src/main.jsx' },
  outdir,
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: ['es2020'],
  jsx: 'automatic',
  minify: true,
  sourcemap: false,
  // Licence headers of the bundled packages go at the end of each file.
  legalComments: 'eof',
  // React's production build, without its development checks.
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
  metafile: true,
})

for (const [file, { bytes }] of Object.entries(result.metafile.outputs)) {
  console.log(`${path.relative(process.cwd(), path.resolve(here, file))}  ${bytes} bytes`)
}
