#!/usr/bin/env node
// The `sessiond` executable: the compiled CLI (dist/, made by `npm run build`, which `npm ci` runs
// as `prepare`). No TypeScript at run time; bin/sessiond-dev.mjs runs the sources through tsx.
// The CLI runs from one bundle (dist/cli/, scripts/bundle-cli.mjs): the commands an operator runs in
// a loop from their own chunks (fast.js), every other command and `--help` from main.js.
let cli;
try {
  cli = await import('../dist/cli/fast.js');
} catch (error) {
  if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !String(error.message).includes('/dist/cli/fast.js')) throw error;
  process.stderr.write('sessiond: not built: run `npm run build` in the sessiond checkout (npm ci runs it too)\n');
  process.exit(2);
}
const code = (await cli.runFast(process.argv)) ?? (await (await import('../dist/cli/main.js')).main(process.argv));
// Pipes and files are written synchronously on POSIX, so nothing printed is lost by exiting here;
// exiting explicitly keeps a lingering handle (a Redis reconnect timer…) from holding the process.
process.exit(code);
