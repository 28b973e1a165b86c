import fs from 'node:fs';

/**
 * The names in folder `dir`; none when it is missing or unreadable. Listing a data or history
 * folder that nothing has been written to yet is not an error: it holds nothing.
 */
export function dirNames(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
