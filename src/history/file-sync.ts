import fs from 'node:fs';

/** fsync of a folder: what makes a file created or renamed in it survive a power cut. */
export function syncDir(dir: string): void {
  fsyncOpened(dir, 'r');
}

/** fsync of one file by name. */
export function syncFile(file: string): void {
  fsyncOpened(file, 'r+');
}

function fsyncOpened(p: string, flags: 'r' | 'r+'): void {
  const fd = fs.openSync(p, flags);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
