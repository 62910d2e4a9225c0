# sessiond worker / API image (used by docker-compose.yml).
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends procps bash ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY machines ./machines
COPY src ./src
# Dev dependencies included: they carry the pinned pi CLI that the worker runs. npm ci's `prepare`
# compiles src/ and machines/ into dist/, which bin/sessiond.mjs runs.
RUN npm ci --no-audit --no-fund
COPY . .
ENV SESSIOND_STATE_DIR=/var/lib/sessiond
VOLUME ["/var/lib/sessiond"]
ENTRYPOINT ["node", "bin/sessiond.mjs"]
CMD ["worker"]
