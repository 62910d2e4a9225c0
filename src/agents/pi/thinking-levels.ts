/** pi's thinking levels (`--thinking`), a plain list for the CLI's flag choices without loading zod. */
export const THINKING_LEVELS = ['off', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const;
