/**
 * How the end-to-end tests launch Debian's Chromium with playwright-core (no downloaded
 * browser): headless, no sandbox (root in CI), nothing fetched in the background.
 */
export const CHROMIUM = {
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
};
