/** Builds the bundle of the CLI's fast commands (fast.js, its chunks, their source maps) into outdir; see bundle-cli.mjs. */
export function bundleCli(options: { root: string; outdir: string }): Promise<void>;
