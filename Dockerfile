# The agentdb app: every shard worker and the HTTP endpoint (`agentdb start`).
FROM node:20-bookworm-slim
# better-sqlite3 builds from source when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY workers ./workers
ENV AGENTDB_DATA_DIR=/data HOST=0.0.0.0 PORT=7070
VOLUME /data
EXPOSE 7070
CMD ["node", "bin/agentdb.js", "start"]
