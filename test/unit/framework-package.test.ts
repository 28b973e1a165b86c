import { describe, expect, it } from 'vitest';
import { loadFramework } from '../../src/frameworks/framework-package.ts';

// What an adapter does when imported: the framework missing, or of a version it was not written
// for, is a clear error at once naming the package and the versions it takes.

describe('loadFramework', () => {
  it('loads a package of a supported major', async () => {
    const zod = await loadFramework<{ z: unknown }>({ adapter: 'agentdb/test', name: 'zod', module: 'zod', majors: [4] });
    expect(zod.z).toBeDefined();
  });

  it('refuses a package that is not installed, naming it and how to install it', async () => {
    await expect(loadFramework({ adapter: 'agentdb/test', name: 'no-such-framework', module: 'no-such-framework', majors: [2, 3] })).rejects.toMatchObject({
      code: 'UNSUPPORTED_FRAMEWORK',
      message: 'UNSUPPORTED_FRAMEWORK: agentdb/test needs the package no-such-framework (2.x or 3.x), which is not installed: npm install no-such-framework@3.',
    });
  });

  it('refuses an unsupported major, naming the version found and the ones supported', async () => {
    await expect(loadFramework({ adapter: 'agentdb/test', name: 'zod', module: 'zod', majors: [3] })).rejects.toMatchObject({
      code: 'UNSUPPORTED_FRAMEWORK',
      message: expect.stringMatching(/^UNSUPPORTED_FRAMEWORK: agentdb\/test supports zod 3\.x; 4\.\d+\.\d+ is installed: npm install zod@3\.$/),
    });
  });

  it('for a 0.x package, takes only the minors listed', async () => {
    await expect(
      loadFramework({ adapter: 'agentdb/openai-agents', name: '@openai/agents', module: '@openai/agents', majors: [0], minors: [19] }),
    ).rejects.toMatchObject({
      code: 'UNSUPPORTED_FRAMEWORK',
      message: expect.stringContaining('supports @openai/agents 0.19; 0.20.0 is installed'),
    });
  });
});
