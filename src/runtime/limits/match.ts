// Moved to config/limit-rules.ts (config/ imports nothing of runtime/); the runtime's limits keep this path.
export * from '../../config/limit-rules.ts';
