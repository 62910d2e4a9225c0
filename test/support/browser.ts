import { existsSync } from 'node:fs';
import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's chromium (never a downloaded browser); SESSIOND_CHROMIUM for another path. */
export const CHROMIUM = process.env.SESSIOND_CHROMIUM ?? '/usr/bin/chromium';

/** Headless Chromium with its profile in `userDataDir`, offline flags on, a 1440×1000 viewport. */
export async function launchChromium(userDataDir: string): Promise<BrowserContext> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} not found: the dashboard tests need Debian's chromium (apt-get install -y chromium) or SESSIOND_CHROMIUM`,
    );
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
    viewport: { width: 1440, height: 1000 },
  });
}
