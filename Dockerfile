# sessiond worker / API image (used by docker-compose.yml).
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends procps bash ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# Dev dependencies included: they carry the pinned pi CLI that the worker runs. The sources are not
# here yet: the build (`prepare`) runs once they are.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY . .
RUN npm run build
ENV SESSIOND_STATE_DIR=/var/lib/sessiond
VOLUME ["/var/lib/sessiond"]
ENTRYPOINT ["node", "bin/sessiond.mjs"]
CMD ["worker"]
