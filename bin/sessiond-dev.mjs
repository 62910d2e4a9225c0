#!/usr/bin/env node
// The development entry: the TypeScript sources through tsx, so the tests, benchmarks and chaos run
// what is in src/ now (bin/sessiond.mjs runs the compiled dist/). Not part of the package.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/interfaces/cli/entry.ts');
const code = await main(process.argv);
// Pipes and files are written synchronously on POSIX, so nothing printed is lost by exiting here;
// exiting explicitly keeps a lingering handle (a Redis reconnect timer…) from holding the process.
process.exit(code);
