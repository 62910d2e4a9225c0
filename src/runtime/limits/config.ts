// Moved to config/limits.ts (config/ imports nothing of runtime/); the runtime's limits keep this path.
export * from '../../config/limits.ts';
