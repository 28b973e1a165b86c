import { access, open } from 'node:fs/promises';
import path from 'node:path';
import { UsageError } from './context.ts';

/**
 * Where `--save-key PATH` puts a new key: the key alone, as `--key-file` reads it, in a file only
 * its owner may read. A new user redirected the printed words to a file (`members add > bob.key`)
 * and every decision with it was refused; this is the way to a key file that works.
 *
 * Checked before the key is minted (a key printed nowhere would be lost), written after: an
 * existing file is never overwritten, as it may hold another key.
 * @throws UsageError when the file exists or its folder does not.
 */
export async function keyFileToSave(file: string): Promise<{ path: string; write(key: string): Promise<void> }> {
  if (await exists(file)) throw new UsageError(`--save-key ${file}: the file exists; not overwritten (it may hold another key)`);
  if (!(await exists(path.dirname(path.resolve(file))))) throw new UsageError(`--save-key ${file}: no such folder`);
  return {
    path: file,
    async write(key) {
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(`${key}\n`);
      } finally {
        await handle.close();
      }
    },
  };
}

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}
