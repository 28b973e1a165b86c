import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keyFrom } from '../../src/cli/key-source.ts';

const source = { envName: 'AGENTDB_KEY', envValue: undefined, stdinAllowed: false };
const out = { stderr: new PassThrough() };

describe('keyFrom --key-file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agentdb-key-source-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the key alone from the file', async () => {
    const file = join(dir, 'scout.key');
    await writeFile(file, 'adb_abc\n', { mode: 0o600 });
    await expect(keyFrom({ keyFile: file }, source, out)).resolves.toBe('adb_abc');
  });

  it('says in words that a missing file is missing, keeping the errno code', async () => {
    const file = join(dir, 'nope.key');
    await expect(keyFrom({ keyFile: file }, source, out)).rejects.toThrow(
      `cannot read --key-file ${file}: no such file (\`members add\` and \`keys mint\` write one with --save-key PATH) (ENOENT)`,
    );
  });

  it('says a folder is not a key file', async () => {
    await expect(keyFrom({ keyFile: dir }, source, out)).rejects.toThrow(/cannot read --key-file .*: it is a folder, not a file \(EISDIR\)/);
  });
});
