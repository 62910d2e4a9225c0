#!/usr/bin/env node
// Loads the TypeScript sources through tsx so `npx sessiond` works right after `npm ci`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/interfaces/cli/main.ts');
process.exitCode = await main(process.argv);
