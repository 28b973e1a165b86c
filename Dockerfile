# The agentdb app: every shard worker and the HTTP endpoint (`agentdb start`).

# Build: `npm ci` installs everything and builds dist/ (the prepare script: tsc), then only
# the runtime dependencies are kept (prune runs no scripts, so dist/ stays).
FROM node:24.22.3-bookworm-slim AS build
# better-sqlite3 builds from source when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY workers ./workers
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

# Run: built JavaScript and runtime dependencies only; no compiler, no TypeScript loader.
FROM node:24.22.3-bookworm-slim
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
ENV AGENTDB_DATA_DIR=/data HOST=0.0.0.0 PORT=7070
# Not root: a statement an agent runs cannot reach past what the image's `node` user may touch.
# The data folder is made the user's before it becomes a volume, so a new named volume is too.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 7070
# /ready answers 200 once Redis answers and every shard has an owner, 503 while stopping
# (the slim image has no curl; node has fetch). /health is liveness only.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 7070) + '/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/bin/agentdb.js", "start"]
