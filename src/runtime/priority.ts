/** The range of a session's priority (enqueue's --priority, a caller's claim): higher runs first. A module of its own so the CLI checks the flag without loading the queue. */
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;
