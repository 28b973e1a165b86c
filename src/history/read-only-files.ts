import fs from 'node:fs';

/**
 * Files opened read-only on first use and closed together: comparing a live database's pages
 * with their images reads from the database and a few history files at once, each many times.
 */
export class ReadOnlyFiles {
  private readonly fds = new Map<string, number>();

  /** The descriptor of `file`, opened on first use. @throws the open's error (ENOENT...). */
  fd(file: string): number {
    let fd = this.fds.get(file);
    if (fd === undefined) {
      fd = fs.openSync(file, 'r');
      this.fds.set(file, fd);
    }
    return fd;
  }

  /** Closes every file opened so far. */
  close(): void {
    for (const fd of this.fds.values()) fs.closeSync(fd);
    this.fds.clear();
  }
}
