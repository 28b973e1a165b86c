import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ when a source is newer: the end-to-end tests run the built `agentdb`.
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // One fork per worker for all its files, its imports kept: a fresh fork per file spent more
    // CPU starting and importing (bullmq, fastify, the MCP SDK, src/) than most files spend
    // testing. Files share the fork's modules, so a file restores what it changes globally
    // (process.env, fake timers) and stops what it starts (pools, servers, clients).
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: integration files start workers and executor children of their own.
    maxWorkers: 2,
  },
});
