import type { Metafile } from 'esbuild';

/**
 * Builds the bundle of the CLI's fast commands (fast.js, its chunks, their source maps) into outdir;
 * see bundle-cli.mjs. Resolves to esbuild's account of it: each chunk's inputs and imports.
 */
export function bundleCli(options: { root: string; outdir: string; webDir?: string }): Promise<{ metafile: Metafile }>;
