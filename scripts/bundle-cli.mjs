// The CLI's fast commands (src/interfaces/cli/fast.ts) as one bundle for the package's executable:
// each command's code, the runtime it reaches, commander and ioredis in a few ESM chunks, so
// `sessiond inspect` resolves, reads and compiles a handful of files instead of about a hundred and
// fifty (bench/cli.ts measures it). Every other package stays an import of node_modules, loaded as
// published. The chunks live in dist/cli/, so what resolves modules or files from its own place
// (createRequire in runtime/queue.ts, the package root in agents/shared/agent-env.ts) finds the
// package's node_modules as dist/src does.
//
// One cost: a command that adds or removes activation jobs (`enqueue`, `cancel`, `delete`…) loads
// BullMQ from node_modules, and BullMQ its own ioredis, beside the bundled one; BullMQ takes the
// bundled connection as any ioredis client (it checks the shape, not the class). Those commands
// load zod, the agents and BullMQ anyway, so the second ioredis is a small part of their start.
import { build } from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

/** routes.ts's line that finds the dashboard's files, replaced in the bundle (see the plugin below). */
const DASHBOARD_DIR = 'const DIR = dirname(fileURLToPath(import.meta.url));';

/**
 * The packages bundled in with their dependencies: pure JavaScript, nothing read from their own
 * directory. Left as imports of node_modules: pino (its transports start workers from its files),
 * Bull Board (it serves its UI's files), OpenTelemetry (optional, imported only when traces are
 * exported) and whatever these depend on.
 */
const BUNDLED_ROOTS = [
  'commander',
  'ioredis',
  'bullmq',
  'zod',
  'xstate',
  'execa',
  'hono',
  '@hono/node-server',
  'prom-client',
  'tree-kill',
  '@agentclientprotocol/sdk',
];

function packageDir(name, from) {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(dir) === dir) throw new Error(`bundle-cli: package ${name} is not installed (looked from ${from})`);
  }
}

/** The names of `roots` and of every package they depend on (their `dependencies`, as installed). */
function dependencyClosure(roots, root) {
  const names = new Set();
  const visit = (name, from) => {
    if (names.has(name)) return;
    names.add(name);
    const dir = packageDir(name, from);
    const { dependencies = {} } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    for (const dependency of Object.keys(dependencies)) visit(dependency, dir);
  };
  for (const name of roots) visit(name, root);
  return names;
}

/**
 * Builds the bundle into outdir (its files: fast.js, main.js, their chunks, their source maps).
 * webDir: where the dashboard's files are at run time (default dist/src/interfaces/web/, as the
 * package has them; bin/sessiond-dev.mjs gives src/interfaces/web/).
 */
export async function bundleCli({ root, outdir, webDir = join(root, 'dist', 'src', 'interfaces', 'web') }) {
  const bundled = dependencyClosure(BUNDLED_ROOTS, root);
  const webFromBundle = `${relative(outdir, webDir).split(sep).join('/')}/`;
  return build({
    absWorkingDir: root,
    entryPoints: { fast: 'src/interfaces/cli/fast.ts', main: 'src/interfaces/cli/main.ts' },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20.6',
    sourcemap: true,
    sourcesContent: false,
    // What each chunk holds and imports (statically or not): test/interfaces/cli/bundle.test.ts reads it.
    metafile: true,
    // Identifiers too: a smaller chunk to read and compile (it is most of a command's start). Names of
    // functions and classes are kept (BullMQ's errors name themselves by their constructor).
    minify: true,
    keepNames: true,
    logLevel: 'warning',
    // The bundled CommonJS packages require Node's own modules: a `require` for them in each chunk.
    banner: {
      js: "import { createRequire as __sessiondCreateRequire } from 'node:module'; const require = __sessiondCreateRequire(import.meta.url);",
    },
    plugins: [
      {
        // The dashboard's files stay in dist/src/interfaces/web/ (scripts/build.mjs copies them there):
        // routes.ts finds them from its own place, which in the bundle is dist/cli/.
        name: 'dashboard-dir',
        setup(b) {
          b.onLoad({ filter: /src[\\/]interfaces[\\/]web[\\/]routes\.ts$/ }, async (args) => {
            const source = await readFile(args.path, 'utf8');
            if (!source.includes(DASHBOARD_DIR))
              throw new Error(`bundle-cli: ${args.path} no longer has \`${DASHBOARD_DIR}\``);
            return {
              contents: source.replace(
                DASHBOARD_DIR,
                `const DIR = fileURLToPath(new URL(${JSON.stringify(webFromBundle)}, import.meta.url));`,
              ),
              loader: 'ts',
            };
          });
        },
      },
      {
        name: 'node_modules-external',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) => {
            if (args.path.startsWith('node:')) return { path: args.path, external: true };
            const name = args.path.startsWith('@')
              ? args.path.split('/').slice(0, 2).join('/')
              : args.path.split('/')[0];
            return bundled.has(name) ? undefined : { path: args.path, external: true };
          });
        },
      },
    ],
  });
}
