// A real headless browser for the dashboard's tests and screenshots: Debian's chromium, driven by playwright-core
// (which downloads no browser of its own). Where chromium is missing it is installed with apt, as the
// control-plane tier installs what it builds from; where that cannot be done, the error says how.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.RUNLET_CHROMIUM ?? '/usr/bin/chromium';

function installChromium(): void {
  const install = ['apt-get', 'install', '-y', '--no-install-recommends', 'chromium'];
  const [command, ...args] = process.getuid?.() === 0 ? install : ['sudo', '-n', ...install];
  try {
    execFileSync(command!, args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  } catch (err) {
    throw new Error(
      `the dashboard tests need Debian's chromium at ${CHROMIUM} and could not install it (${(err as Error).message}): run \`apt-get install chromium\` as root, or set RUNLET_CHROMIUM to a Chromium binary`,
      { cause: err },
    );
  }
}

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) installChromium();
  // --no-sandbox: test machines and containers often run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}
