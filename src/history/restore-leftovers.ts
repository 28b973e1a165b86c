import fs from 'node:fs';
import path from 'node:path';

/** The name of the restored copy beside the live file, before it is renamed over it: `<db>.restore-<pid>.tmp`. */
export const NEXT_SUFFIX = '.restore-';

/** Removes what a restore of this database that crashed left: its rebuilt file and its copy. */
export function removeLeftovers(hdir: string, dbPath: string): void {
  const rm = (dir: string, match: (name: string) => boolean) => {
    let names: string[] = [];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) if (match(name)) fs.rmSync(path.join(dir, name), { force: true });
  };
  rm(hdir, (n) => /^restore-\d+-\d+\.sqlite(-wal|-shm)?$/.test(n));
  const base = path.basename(dbPath) + NEXT_SUFFIX;
  rm(path.dirname(dbPath), (n) => n.startsWith(base) && /\.tmp(-wal|-shm)?$/.test(n));
}
