#!/usr/bin/env node
// Loads the TypeScript sources through tsx so `npx sessiond` works right after `npm ci`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/interfaces/cli/main.ts');
const code = await main(process.argv);
// Pipes and files are written synchronously on POSIX, so nothing printed is lost by exiting here;
// exiting explicitly keeps a lingering handle (a Redis reconnect timer…) from holding the process.
process.exit(code);
