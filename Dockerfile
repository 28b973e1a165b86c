# The agentdb app: every shard worker and the HTTP endpoint (`agentdb start`).

# Build: `npm ci` installs everything and builds dist/ (the prepare script: tsc), then only
# the runtime dependencies are kept (prune runs no scripts, so dist/ stays).
FROM node:20-bookworm-slim AS build
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
FROM node:20-bookworm-slim
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
ENV AGENTDB_DATA_DIR=/data HOST=0.0.0.0 PORT=7070
VOLUME /data
EXPOSE 7070
CMD ["node", "dist/bin/agentdb.js", "start"]
