import { LIFECYCLE_DEFAULTS as DEFAULTS, type LifecycleLimits } from '../../config/defaults.ts';

/** The shape is declared with its defaults (config/defaults.ts), where the configuration reads it too. */
export type { LifecycleLimits };

export const LIFECYCLE_DEFAULTS: LifecycleLimits = DEFAULTS;
